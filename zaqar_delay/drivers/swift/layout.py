"""The version of the Swift layout, kept in the account's ``zd:layout``
container as the object ``version`` (``{"v": N}``).

Read when the driver first talks to Swift and again by every gc pass. An
account without the object gets the current version when it holds no
queue, else version 1: its queues were written before versions existed,
and a later release must not take them for its own layout. A newer
version is refused (this code would misread it); an older one until
``zaqar-delay-migrate --upgrade-layout`` has brought the account up to
date and written the version this code reads.

Versions:

1. every message has its own position (``p/``), record (``m/``) and
   filing (``a/``, ``d/``) objects.
"""

import json

from zaqar_delay import layout as shared
from zaqar_delay.drivers.swift import names

CURRENT = 1
WHERE = 'object {}/{}'.format(names.LAYOUT_CONTAINER, names.LAYOUT_OBJ)


def version(store):
    """The account's layout version, recording one if it has none. That
    write is a create (connection.Store.create): racing first users, two
    releases on a new account, all read back the one that stayed."""
    found = _stored(store)
    if found is not None:
        return found
    holds_queues = store.containers(
        names.container_prefix(names.MESSAGES), limit=1)
    store.create(names.LAYOUT_CONTAINER, names.LAYOUT_OBJ,
                 _body(shared.UNVERSIONED if holds_queues else CURRENT),
                 content_type='application/json', recreate=True)
    return _stored(store)


def check(store):
    """Raise LayoutMismatch unless the account is at CURRENT."""
    shared.check('Swift', version(store), CURRENT, WHERE)


def write(store, number):
    """Overwrite the version (the upgrade's last step)."""
    store.put(names.LAYOUT_CONTAINER, names.LAYOUT_OBJ, _body(number),
              content_type='application/json', recreate=True)


def _body(number):
    return json.dumps({'v': number}).encode()


def _stored(store):
    found = store.get_json(names.LAYOUT_CONTAINER, names.LAYOUT_OBJ)
    return None if found is None else found[1]['v']
