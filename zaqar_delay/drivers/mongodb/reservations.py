"""Positions reserved and not yet stored: how far persistent reads may go.

A post (a dead letter, a group move) takes its positions from the queue's
counter document first and stores its messages afterwards, so while two
run at once the later one's messages can be stored before the earlier
one's. A persistent consumer handed them would move its cursor past
positions whose messages arrive later, below the cursor, and never get
them. So the update that takes the positions also records them, in the
counter document's ``rv``::

    rv: {<token>: {s: first position, a: reserved at (epoch ms)}}

and the writer removes its entry once the store answered (stored, or
refused: what it did not store then, it never will). :func:`horizon`, the
lowest position such a writer may still fill, is read from the same
document with ``n``; a persistent page (and the read-by-all cut) stops
before it. Read before the page, it is safe: every position below it was
stored or given up when it was read, and any later reservation lies above
``n`` then.

An entry older than ``reservation_timeout`` no longer counts (its writer
died, or is slower than any store call should be), so a dead post holds
consumers back for that long at most; gc removes such entries
(:func:`forget_stale`). The cost of a post is one update more (the
release), whatever the number of consumers; ``rv`` holds one entry per
write in flight on the queue.

Taking and recording is one pipeline update (MongoDB 4.2 or later): the
entry needs the new ``n``, which a classic update cannot read.
"""

import uuid

from oslo_log import log as logging
from pymongo import errors as mongo_errors
from pymongo import ReturnDocument

from zaqar_delay import errors
from zaqar_delay.drivers.mongodb import fields as f

LOG = logging.getLogger(__name__)

START, AT = 's', 'a'


def reserve(driver, queue, project, count, now, token=None):
    """Atomically take ``count`` new positions and record them under
    ``token`` (a fresh one if None; no ``.`` or ``$`` in it). Returns
    (first position, token).

    One update of the queue's counter document: concurrent writers get
    disjoint ranges, and the unique ``{p, q, k}`` index backs it up.
    """
    token = token or uuid.uuid4().hex
    last = {'$add': [{'$ifNull': ['$n', 0]}, count]}
    entry = {START: {'$subtract': ['$n', count - 1]}, AT: {'$literal': now}}
    update = [{'$set': {'n': last}},
              {'$set': {f.RESERVATIONS + '.' + token: entry}}]
    for attempt in (1, 2):
        try:
            doc = driver.counters.find_one_and_update(
                f.queue_filter(queue, project), update,
                projection={'n': True, '_id': False}, upsert=True,
                return_document=ReturnDocument.AFTER)
            return doc['n'] - count + 1, token
        except mongo_errors.DuplicateKeyError:
            # Two first posts raced to create the counter; the loser's
            # upsert failed and the update now finds the document.
            if attempt == 2:
                raise


def release(driver, queue, project, token):
    """Forget reservation ``token``. Its writer's messages are stored,
    so a lost reply must not fail it: the entry then goes stale."""
    try:
        driver.counters.update_one(
            f.queue_filter(queue, project),
            {'$unset': {f.RESERVATIONS + '.' + token: ''}})
    except errors.BackendUnavailable as exc:
        LOG.warning('reservation %s of queue %r left to go stale: %s',
                    token, queue, exc)


def horizon(counter, now, timeout_ms):
    """The lowest position a writer may still store into, from a counter
    document read with ``n`` and ``rv``: the first of the fresh entries,
    else ``n + 1``. ``counter`` None (no counter yet): 1, where the
    first post's positions start."""
    if counter is None:
        return 1
    fresh = [entry[START] for entry in
             counter.get(f.RESERVATIONS, {}).values()
             if entry[AT] > now - timeout_ms]
    return min(fresh, default=counter['n'] + 1)


def read_horizon(driver, queue, project, now):
    """:func:`horizon` of ``queue`` at ``now``."""
    return horizon(driver.counters.find_one(
        f.queue_filter(queue, project),
        {'n': True, f.RESERVATIONS: True, '_id': False}), now,
        timeout_ms(driver))


def timeout_ms(driver):
    return int(driver.store_conf.reservation_timeout * 1000)


def forget_stale(driver, queue, project, now):
    """gc(): remove the entries that no longer count; how many. Each is
    removed only if still stale (a released one is simply gone)."""
    where = f.queue_filter(queue, project)
    counter = driver.counters.find_one(where, {f.RESERVATIONS: True})
    before = now - timeout_ms(driver)
    stale = [token for token, entry in
             (counter or {}).get(f.RESERVATIONS, {}).items()
             if entry[AT] <= before]
    for token in stale:
        field = f.RESERVATIONS + '.' + token
        driver.counters.update_one(
            dict(where, **{field + '.' + AT: {'$lte': before}}),
            {'$unset': {field: ''}})
    return len(stale)
