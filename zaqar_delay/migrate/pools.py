"""With pooling: each pool moved on its own, from the old store the
operator names for it (``--pool-source NAME=URI``) into the pool's own
store, the URI the pool is registered with in the management store,
which must name a zaqar-delay driver by then. A queue belongs to the pool
its catalogue entry names (``catalogue_controller.list``, as Zaqar's
pooling driver routes it); queue metadata, pools, flavors and the
catalogue stay as they are.

Every selected pool is checked (known, a source of a kind this command
reads named for it, ours as its target) before anything moves, so a typo
changes nothing.
"""

import dataclasses

from zaqar_delay import driver as zd_driver
from zaqar_delay import errors
from zaqar_delay.migrate import queues
from zaqar_delay.migrate import sources


@dataclasses.dataclass
class Pool:
    name: str
    source_uri: str
    target: object    # the pool's zaqar-delay data driver

    def selected(self, projects=(), names=()):
        """(project, queue) of the pool's queues, project by project."""
        control = self.target.control_driver
        for project in projects or queues.all_projects(control):
            placed = {entry['queue'] for entry in
                      control.catalogue_controller.list(project)
                      if entry['pool'] == self.name}
            for queue in queues.queues_of(control, project):
                if queue in placed and (not names or queue in names):
                    yield project, queue


def source_uris(pairs):
    """{pool name: source URI} from ``--pool-source NAME=URI`` values."""
    uris = {}
    for pair in pairs:
        name, sep, uri = pair.partition('=')
        if not sep or not name or not uri:
            raise errors.InvalidInput(
                '--pool-source {!r}: expected NAME=URI'.format(pair))
        if name in uris:
            raise errors.InvalidInput(
                '--pool-source names pool {!r} twice'.format(name))
        uris[name] = uri
    return uris


def planned(store, names, uris):
    """[Pool] to move, in the catalog's order: ``names`` (every
    registered pool when empty), each with its source URI from ``uris``
    and its own store as the target."""
    catalog = store._pool_catalog
    registered = {pool['name']: pool for pool in
                  next(catalog._pools_ctrl.list(detailed=True, limit=0))}
    unknown = sorted(set(names) - set(registered))
    if unknown:
        raise errors.InvalidInput('no pool named {} in the management '
                                  'store'.format(', '.join(unknown)))
    selected = [name for name in registered if not names or name in names]
    stray = sorted(set(uris) - set(selected))
    if stray:
        raise errors.InvalidInput('--pool-source names {}, not a selected '
                                  'pool'.format(', '.join(stray)))
    plan = []
    for name in selected:
        if name not in uris:
            raise errors.InvalidInput(
                'pool {}: name its old store with --pool-source {}=URI '
                '(Zaqar\'s own redis://, mongodb:// or swift://)'.format(
                    name, name))
        sources.check_uri(uris[name])
        target = catalog.get_driver(name)._storage
        if not isinstance(target, zd_driver.DataDriver):
            raise errors.InvalidInput(
                'pool {} is registered with {}, not a zaqar-delay store: '
                'update the pool to the store to move into (delay.redis://, '
                'delay.mongodb:// or delay.swift://) first'.format(
                    name, registered[name]['uri'].split('://')[0] + '://'))
        plan.append(Pool(name, uris[name], target))
    return plan
