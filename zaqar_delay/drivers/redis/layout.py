"""The version of the Redis layout, kept in ``zd:layout``.

Written on first use of an empty store; checked when the driver first
talks to Redis. A store written by a later version of this package is
refused (this code would misread it); one written by an earlier version
is refused until ``zaqar-delay-migrate --upgrade-layout`` has brought it
up to date (docs/redis.md, "Layout versions"). A store with queues and no
version key is version 1: written before versions existed.

Versions:

1. before retention: messages posted then are not in ``Q:free``.
2. ``Q:free`` holds every live message not under a claim.
"""

from zaqar_delay import layout as shared
from zaqar_delay.drivers.redis import keys

LAYOUT_KEY = keys.PREFIX + ':layout'
WHERE = 'key ' + LAYOUT_KEY
CURRENT = 2
UNVERSIONED = shared.UNVERSIONED
# Messages filed per script call by the upgrade (bounded work per call).
UPGRADE_BATCH = 500


def version(client):
    """The store's layout version, writing CURRENT into an empty store."""
    found = client.get(LAYOUT_KEY)
    if found is not None:
        return int(found)
    if not client.exists(keys.QUEUE_REGISTRY):
        # SET NX: a driver of another version that got here first wins.
        client.set(LAYOUT_KEY, CURRENT, nx=True)
        return int(client.get(LAYOUT_KEY))
    return UNVERSIONED


def check(client):
    """Raise LayoutMismatch unless the store is at CURRENT."""
    shared.check('Redis', version(client), CURRENT, WHERE)


def upgrade(driver, say):
    """Bring the store to CURRENT, queue by queue, in bounded batches;
    safe to kill midway and run again. Run it while no zaqar-server of an
    earlier version writes to the store."""
    client = driver.connection
    found = driver.guarded(lambda: version(client))
    shared.refuse_later('Redis', found, CURRENT, WHERE)
    if found == CURRENT:
        say('Redis layout is version {}: nothing to upgrade'.format(found))
        return
    queues = driver.queues()
    for project, queue in queues:
        filed_after = ''
        while filed_after is not False:
            last = driver.run_script('layout_free', queue, project,
                                     filed_after, UPGRADE_BATCH)
            filed_after = False if last is None else last.decode()
    driver.guarded(lambda: client.set(LAYOUT_KEY, CURRENT))
    say('Redis layout upgraded from version {} to {} ({} queues)'.format(
        found, CURRENT, len(queues)))
