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
refused: what it did not store then, it never will), recording first the
positions it stored nothing at as given up (given_up.py), so that a
persistent consumer does not count them as lost. :func:`horizon`, the
lowest position such a writer may still fill, is read from the same
document with ``n``; a persistent page (and the read-by-all cut) stops
before it. Read before the page, it is safe: every position below it was
stored or given up when it was read, and any later reservation lies above
``n`` then.

An entry older than ``reservation_timeout`` no longer counts (its writer
died, or is slower than any store call should be), so a dead post holds
consumers back for that long at most. A group move's entries count
longer (``h``: MOVE_TIMEOUT plus that timeout): a move whose mover died
after its commit is landed by gc only MOVE_TIMEOUT after it started, at
the positions it reserved, which readers let past them meanwhile would
never get. Whoever meets such an entry first,
a persistent page (:func:`settled_horizon`) or gc (:func:`forget_stale`),
gives it back (:func:`give_back`): the positions of its range that hold
no message are recorded as given up, then the entry is removed. A dead
writer's positions are so never counted as lost: no message of it was
stored there, and its caller got no answer that it was. (A message it
stored there that went before the entry was given back is not counted
either; one it stores after that may land behind a consumer's cursor, as
the option's help says.) The cost of a post is one update more (the
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
from zaqar_delay.drivers.mongodb import given_up

LOG = logging.getLogger(__name__)

START, COUNT, AT, HOLD = 's', 'c', 'a', 'h'


def reserve(driver, queue, project, count, now, token=None, hold_ms=None):
    """Atomically take ``count`` new positions and record them under
    ``token`` (a fresh one if None; no ``.`` or ``$`` in it). Returns
    (first position, token). ``hold_ms``: how long the entry counts, if
    longer than ``reservation_timeout`` (a group move's, which gc
    finishes only after its MOVE_TIMEOUT).

    One update of the queue's counter document: concurrent writers get
    disjoint ranges, and the unique ``{p, q, k}`` index backs it up.
    """
    token = token or uuid.uuid4().hex
    last = {'$add': [{'$ifNull': ['$n', 0]}, count]}
    entry = {START: {'$subtract': ['$n', count - 1]},
             COUNT: {'$literal': count}, AT: {'$literal': now}}
    if hold_ms is not None:
        entry[HOLD] = {'$literal': hold_ms}
    # ``x`` null: a counter a queue's deletion kept (its positions go on
    # in the queue created again) is kept for good once used again.
    update = [{'$set': {'n': last, 'x': {'$literal': None}}},
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


def release(driver, queue, project, token, unused=()):
    """Forget reservation ``token``, its ``unused`` positions recorded as
    given up first. Its writer's messages are stored, so a lost reply
    must not fail it: the entry then goes stale (and is given back)."""
    try:
        given_up.record(driver, queue, project, unused)
        driver.counters.update_one(
            f.queue_filter(queue, project),
            {'$unset': {f.RESERVATIONS + '.' + token: ''}})
    except errors.BackendUnavailable as exc:
        LOG.warning('reservation %s of queue %r left to go stale: %s',
                    token, queue, exc)


def give_back_token(driver, queue, project, token):
    """:func:`give_back` reservation ``token`` (gone already: nothing),
    for a writer that does not know which of its positions it filled (a
    group move finished by gc may have landed part of it earlier). As
    :func:`release`, a lost reply leaves the entry to go stale."""
    field = f.RESERVATIONS + '.' + token
    try:
        counter = driver.counters.find_one(f.queue_filter(queue, project),
                                           {field: True, '_id': False})
        entry = (counter or {}).get(f.RESERVATIONS, {}).get(token)
        if entry is not None:
            give_back(driver, queue, project, token, entry)
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
             if entry[AT] > now - entry.get(HOLD, timeout_ms)]
    return min(fresh, default=counter['n'] + 1)


def timeout_ms(driver):
    return int(driver.store_conf.reservation_timeout * 1000)


def forget_stale(driver, queue, project, now):
    """gc(): give back the entries that no longer count; how many."""
    counter = driver.counters.find_one(f.queue_filter(queue, project),
                                       {f.RESERVATIONS: True})
    return _give_back_stale(driver, queue, project, now, counter)


def settled_horizon(driver, queue, project, now):
    """:func:`horizon` of ``queue`` at ``now``, for a persistent page,
    which may pass the positions of a stale entry: it gives those back
    first, so that none counts as lost."""
    counter = driver.counters.find_one(
        f.queue_filter(queue, project),
        {'n': True, f.RESERVATIONS: True, '_id': False})
    _give_back_stale(driver, queue, project, now, counter)
    return horizon(counter, now, timeout_ms(driver))


def _give_back_stale(driver, queue, project, now, counter):
    default = timeout_ms(driver)
    stale = {token: entry for token, entry in
             (counter or {}).get(f.RESERVATIONS, {}).items()
             if entry[AT] <= now - entry.get(HOLD, default)}
    for token, entry in stale.items():
        give_back(driver, queue, project, token, entry,
                  {AT: {'$lte': now - entry.get(HOLD, default)}})
    return len(stale)


def give_back(driver, queue, project, token, entry, still=None):
    """Remove entry ``token`` (as read: ``entry``) if it still matches
    ``still`` (conditions on its fields), recording first the positions
    of its range that hold no message as given up: one read of the
    position index over the writer's own range. An entry of an earlier
    version of this driver, without its count, is only removed."""
    give_up_empty(driver, queue, project, entry[START],
                  entry.get(COUNT, 0))
    field = f.RESERVATIONS + '.' + token
    driver.counters.update_one(
        dict(f.queue_filter(queue, project),
             **{field + '.' + key: value
                for key, value in (still or {}).items()}),
        {'$unset': {field: ''}})


def give_up_empty(driver, queue, project, first, count):
    """Record the positions ``first`` .. ``first + count - 1`` that hold
    no message as given up: one read of the position index over that
    range (a writer's own)."""
    reserved = range(first, first + count)
    if not reserved:
        return
    where = f.queue_filter(queue, project, **{f.POSITION: {
        '$gte': reserved.start, '$lt': reserved.stop}})
    stored = {doc[f.POSITION] for doc in driver.messages.find(
        where, {f.POSITION: True, '_id': False}, hint='zd_position')}
    given_up.record(driver, queue, project, [
        position for position in reserved if position not in stored])
