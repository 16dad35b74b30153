"""Layout versions shared by the backends: each store keeps the version
of the layout that wrote it (Redis ``zd:layout``, MongoDB the ``layout``
collection, Swift the ``zd:layout`` container), and a driver refuses a
store it would misread."""

from zaqar_delay import errors

# The version of a store that holds queues and no version: written before
# versions existed. An empty store gets the current one.
UNVERSIONED = 1


def refuse_later(backend, found, current, where):
    """An upgrade's first step: raise LayoutMismatch for a store of a
    later layout than ``current`` (this code would misread it), and
    leave it as it is."""
    if found > current:
        check(backend, found, current, where)


def check(backend, found, current, where):
    """Raise LayoutMismatch unless ``found`` is ``current``."""
    if found > current:
        raise errors.LayoutMismatch(
            'the {} store has layout version {} ({}), newer than the {} '
            'this zaqar-delay knows: upgrade zaqar-delay on this '
            'host'.format(backend, found, where, current))
    if found < current:
        raise errors.LayoutMismatch(
            'the {} store has layout version {} ({}); this zaqar-delay '
            'needs {}: run zaqar-delay-migrate --config-file <zaqar.conf> '
            '--upgrade-layout'.format(backend, found, where, current))
