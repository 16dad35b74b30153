"""Zaqar tests that cannot hold on our drivers by design, with the reason,
and the building of one test class per (backend, Zaqar suite).

Expected failures are keyed by (backend, suite, test name); ``'*'`` as
backend means every one. Each is run as a strict expected failure (it must
fail: a pass means the entry is stale), and each is listed in
docs/compatibility.md (*Where we differ, by design*).
"""

import functools

import pytest

# SPEC §7: due times come from the store's clock (Redis TIME, MongoDB's
# server time), so a test that moves only the API node's clock (it mocks
# oslo's timeutils.utcnow_ts) cannot end a claim early.
STORE_CLOCK = ("mocks the API node's clock (oslo timeutils); this driver "
               "takes every due time from the store's clock (SPEC §7)")
# Swift has no clock, so the driver reads the API node's in milliseconds
# (time.time()): due times must not round to whole seconds, which is all
# the mocked utcnow_ts gives (mocking it two seconds ahead of a truncated
# "now" can land before a two-second claim has ended).
MILLISECOND_CLOCK = ("mocks oslo's timeutils.utcnow_ts (whole seconds); "
                     "this driver reads the API node's clock in "
                     "milliseconds (time.time()), which the mock does not "
                     "move")

# Zaqar's health suite mocks its MongoDB driver's own classes
# (DataDriver._health, MessageController.delete), which ours do not use.
PATCHES_ZAQARS_MONGODB = ("patches Zaqar's MongoDB driver classes "
                          "(zaqar.storage.mongodb), which this driver "
                          "does not run")
# Zaqar's own Redis and Swift drivers report no message_volume either.
NO_STORE_WIDE_COUNT = ("the detailed health report has no message_volume: "
                       "this store keeps no store-wide message count, and "
                       "counting would read every queue (Zaqar's own "
                       "Redis and Swift drivers report none either)")

EXPECTED = {
    ('redis', 'Claims', 'test_delete_message_expired_claim'): STORE_CLOCK,
    ('mongodb', 'Claims', 'test_delete_message_expired_claim'): STORE_CLOCK,
    ('swift', 'Claims', 'test_delete_message_expired_claim'):
        MILLISECOND_CLOCK,
    ('redis', 'WsgiHealth', 'test_message_volume'): PATCHES_ZAQARS_MONGODB,
    ('mongodb', 'WsgiHealth', 'test_message_volume'): PATCHES_ZAQARS_MONGODB,
    ('swift', 'WsgiHealth', 'test_message_volume'): PATCHES_ZAQARS_MONGODB,
    ('redis', 'WsgiHealth', 'test_operation_status'): PATCHES_ZAQARS_MONGODB,
    ('mongodb', 'WsgiHealth', 'test_operation_status'): PATCHES_ZAQARS_MONGODB,
    ('swift', 'WsgiHealth', 'test_operation_status'): PATCHES_ZAQARS_MONGODB,
    ('redis', 'WsgiHealth', 'test_basic'): NO_STORE_WIDE_COUNT,
    ('swift', 'WsgiHealth', 'test_basic'): NO_STORE_WIDE_COUNT,
}


def define(namespace, backends, suites, attributes_of):
    """Add to ``namespace`` a subclass of each of Zaqar's ``suites``
    ({suite name: Zaqar's test class}) for each backend, with the class
    attributes ``attributes_of(backend, suite)`` and its expected
    failures marked. Zaqar's own drivers are named ``zaqar-<backend>``."""
    for backend in backends:
        for suite, zaqar_class in suites.items():
            attributes = dict(attributes_of(backend, suite),
                              backend=backend,
                              __module__=namespace['__name__'])
            attributes.update(marked(zaqar_class, backend, suite))
            name = class_name(backend, suite)
            namespace[name] = type(name, (zaqar_class,), attributes)


def class_name(backend, suite):
    """The test class of one backend and suite: ``TestRedisQueues``, and
    ``TestZaqarredisQueues`` for Zaqar's own driver (tools/conformance.py
    selects and reads these names)."""
    return 'Test{}{}'.format(backend.replace('zaqar-', 'Zaqar').capitalize(),
                             suite)


def marked(test_base, backend, suite):
    """Class attributes that mark the expected failures of one suite."""
    attributes = {}
    for (where, in_suite, name), reason in EXPECTED.items():
        if in_suite == suite and where in ('*', backend):
            attributes[name] = pytest.mark.xfail(
                reason=reason, strict=True)(_copy(getattr(test_base, name)))
    return attributes


def _copy(test):
    """A test of this class alone: marking Zaqar's function itself would
    mark it for every backend."""
    @functools.wraps(test)
    def run(self, *args, **kwargs):
        return test(self, *args, **kwargs)
    return run
