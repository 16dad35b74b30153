"""Positions a writer reserved and gave up: never a message to lose.

A writer takes its positions before it stores (reservations.py), and may
store fewer messages than it took positions for: an insert that finds
an id already stored (a post run twice, a ``carry_in`` racing another, two
posts of the same ids racing), a dead letter or a group member that left
before its move, a move aborted, a writer that died (its reservation,
once stale, is given back by whoever finds it: reservations.give_back).
No message was ever at such a position, so a persistent consumer whose
next page starts past it must not count it as ``lost``.

Each such position is one document of collection ``given_up``, ``{p, q,
k}``, unique on ``zd_given_up`` (so recording one twice, by a writer and
by whoever gives its stale reservation back, counts it once). A
consumer's page subtracts those in the gap it counts (:func:`between`,
a count of index keys, read only when the page does start past a gap).
gc drops those no consumer can count any more (:func:`prune`, a bounded
batch per pass): below the lowest position a consumer was handed, the
oldest message stored and every reservation, as a new consumer counts
nothing before its first page. So the collection holds the positions
given up since the slowest consumer last read or the oldest message was
stored, and writers give positions up only on retries, races and
failures.
"""

from pymongo import errors as mongo_errors

from zaqar_delay import errors
from zaqar_delay.drivers.mongodb import connection
from zaqar_delay.drivers.mongodb import consumers
from zaqar_delay.drivers.mongodb import fields as f
from zaqar_delay.drivers.mongodb import queries

# Given-up positions gc forgets per queue and pass, at most.
PRUNE_BATCH = 1000


def record(driver, queue, project, positions):
    """Record ``positions`` of ``queue`` as given up; one recorded
    already (by a retry, or by gc) stays recorded once."""
    if not positions:
        return
    try:
        driver.given_up.insert_many(
            [f.queue_filter(queue, project, **{f.POSITION: position})
             for position in sorted(set(positions))], ordered=False)
    except mongo_errors.BulkWriteError as exc:
        if not connection.refused_as_duplicates(exc):
            raise errors.BackendUnavailable(backend='MongoDB', reason=exc)


def between(driver, queue, project, after, before):
    """How many positions strictly between ``after`` and ``before`` were
    given up: index keys of ``zd_given_up`` only."""
    query = queries.given_up(queue, project, after, before)
    return driver.given_up.count_documents(query.filter, hint=query.index)


def prune(driver, queue, project, floor, batch=PRUNE_BATCH):
    """Forget up to ``batch`` of the given-up positions below ``floor``
    (see :func:`lowest_countable`), lowest first; how many."""
    if floor is None:
        return 0
    below = queries.given_up(queue, project, before=floor)
    past_batch = driver.given_up.find(
        below.filter, {f.POSITION: True, '_id': False}, [(f.POSITION, 1)],
        1, below.index, skip=batch)
    if past_batch:
        below = queries.given_up(queue, project,
                                 before=past_batch[0][f.POSITION])
    return driver.given_up.delete_many(below.filter).deleted_count


def lowest_countable(driver, queue, project, counter, oldest):
    """The lowest position a consumer's page may still count as lost, or
    None when nothing was ever posted: above the lowest position handed
    to a consumer of the queue (one probe of ``zd_sub_handed``), and
    no lower than the ``oldest`` stored message (a consumer handed
    nothing yet counts nothing before its first page, which starts
    there) nor any reservation of the ``counter`` document, read before
    ``oldest``."""
    if counter is None:
        return None
    slowest = driver.subscriptions.find(
        {'p': project, 's': queue, consumers.HANDED: {'$exists': True}},
        {consumers.HANDED: True, '_id': False},
        [(consumers.HANDED, 1)], 1, 'zd_sub_handed')
    candidates = [counter['n'] + 1]
    candidates += [entry['s'] for entry in
                   counter.get(f.RESERVATIONS, {}).values()]
    if oldest is not None:
        candidates.append(oldest)
    if slowest:
        candidates.append(slowest[0][consumers.HANDED] + 1)
    return min(candidates)


def forget_queue(driver, queue, project):
    """The queue is purged: its consumers start again from its
    beginning, and count nothing given up before."""
    driver.given_up.delete_all(queries.given_up(queue, project).filter)
