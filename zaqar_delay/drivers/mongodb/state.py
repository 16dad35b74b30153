"""Steps the message and claim controllers share: settling a queue at
"now", and turning stored documents into Zaqar's message dicts.

Settling is what Redis does in ``refresh()`` (lua/_common.lua): claims that
ended put their messages back (``c -> d``; ``d`` already holds claim expiry
+ redelivery delay), delayed messages that are due become ready
(``d -> r``), and a bounded batch of expired messages is deleted (their
groups then advance: groups.py). Each step takes a bounded batch, so no
single operation grows with a backlog. Each step is an index range over
exactly the documents that change, so a queue with nothing to settle
costs three empty index probes; claims, pops and plain listings send one
probe for all three instead (``settle_if_due``). Blocked group members
(``b``) are in none of these ranges; a group head keeps its ``h``
through ``c -> d -> r``.
"""

import json

from zaqar_delay import controller
from zaqar_delay.drivers.mongodb import fields as f
from zaqar_delay.drivers.mongodb import groups
from zaqar_delay.drivers.mongodb import queries

# Claims settled per pass, expired messages dropped per claim or list.
SETTLE_BATCH = 1000
PURGE_BATCH = 100
# Expired messages one claim deletes on its way to ready ones
# (live_front) before it answers with what it found.
EXPIRED_BUDGET = 1000
# Claims, pops and plain listings on one queue per full settle when the
# probe finds nothing due (settle_if_due): each makes at most one claim
# document, so a full settle's SETTLE_BATCH keeps ahead of them.
SETTLE_EVERY = 100
# How long past its due time a claimed message must be before gc checks
# that its claim still exists: longer than any renew takes between
# updating its claim document and that claim's messages.
ORPHAN_AGE_MS = 60 * 1000


def settle(driver, queue, project, now, purge_batch=PURGE_BATCH):
    """Bring a queue's states up to ``now``; returns messages purged."""
    end_claims(driver, queue, project, now)
    promote_due(driver, queue, project, now)
    return purge_expired(driver, queue, project, now, purge_batch)


def settle_if_due(driver, queue, project, now):
    """``settle`` for a claim, a pop or a listing of unclaimed, undelayed
    messages: only when one probe finds a delayed message due, a claimed
    one due again or an expired one, and on every SETTLE_EVERYth such call
    on the queue in this process. One request instead of settle's three
    on a queue with nothing to settle.

    What the probe lets wait is invisible to those callers: a claim that
    ended while its redelivery delay runs keeps its messages in ``c``
    instead of ``d`` until they are due again (claimable in neither), and
    a claim that ended with no message left holds only its document. The
    SETTLE_EVERYth call removes up to SETTLE_BATCH of those, more than the
    calls in between can have made; gc removes the rest.

    Returns True when expired messages may be left (its purge took a
    full batch): then a read should not leave ``e`` to MongoDB's FETCH
    (live_front)."""
    if driver.settle_schedule.may_skip(queue, project) and not \
            driver.messages.find(queries.needs_settling(
                queue, project, now).filter, {'_id': True}, limit=1):
        return False
    ended = end_claims(driver, queue, project, now)
    promote_due(driver, queue, project, now)
    purged = purge_expired(driver, queue, project, now)
    if ended < SETTLE_BATCH:
        driver.settle_schedule.settled(queue, project)
    return purged >= PURGE_BATCH


class SettleSchedule:
    """Which call on each queue must settle whatever the probe says
    (settle_if_due), counted per process for at most MAX_QUEUES queues:
    past that the counts start again (gc settles every queue anyway)."""

    MAX_QUEUES = 10_000

    def __init__(self):
        self._calls = {}

    def may_skip(self, queue, project):
        key = (project, queue)
        calls = self._calls.get(key, 0) + 1
        if len(self._calls) >= self.MAX_QUEUES and key not in self._calls:
            self._calls.clear()
        self._calls[key] = calls
        return calls < SETTLE_EVERY

    def settled(self, queue, project):
        self._calls.pop((project, queue), None)


def promote_due(driver, queue, project, now):
    """Up to SETTLE_BATCH delayed messages and waiting group members
    that are due become ready and blocked (listed), the earliest due
    first: one bounded read however many fell due at once (the next
    settle takes the next batch), an update per state found."""
    due = queries.delayed_due(queue, project, now)
    found = driver.messages.find(due.filter, {'_id': True, f.STATE: True},
                                 due.sort, SETTLE_BATCH, due.index)
    for was, becomes in ((f.DELAYED, f.READY), (f.WAITING, f.BLOCKED)):
        ids = [doc['_id'] for doc in found if doc[f.STATE] == was]
        if ids:
            driver.messages.update_many(
                dict(due.filter, **{f.STATE: was, '_id': {'$in': ids}}),
                {'$set': {f.STATE: becomes}})


def end_claims(driver, queue, project, now):
    """Claims whose expiry passed give their messages back (``c -> d``).

    Three steps: mark the claim documents ended (only if still expired),
    give back the messages of the marked claims, delete the marked
    documents. The mark is what makes this safe against a renew racing it:
    a renew succeeds only on an unmarked claim, so either it pushed the
    expiry first (the mark's filter then fails and the messages stay
    claimed) or it fails; never success while the messages go to another
    consumer. An interruption leaves marked claims, ended again by the next
    settle, never a message stuck in ``c`` without a claim. Returns how
    many ended claims it found.
    """
    ended = queries.ended_claims(queue, project, now)
    found = driver.claims.find(ended.filter, {'_id': True}, ended.sort,
                               SETTLE_BATCH, ended.index)
    if not found:
        return 0
    driver.claims.update_many(
        {'_id': {'$in': [claim['_id'] for claim in found]},
         f.EXPIRES: {'$lte': now}}, {'$set': {f.ENDED: True}})
    claim_ids = [claim['_id'] for claim in driver.claims.find(
        {'_id': {'$in': [claim['_id'] for claim in found]},
         f.ENDED: True}, {'_id': True})]
    if claim_ids:
        give_back(driver, queue, project, claim_ids)
        driver.claims.delete_many({'_id': {'$in': claim_ids},
                                   f.ENDED: True})
    return len(found)


def give_back(driver, queue, project, claim_ids):
    """Messages still held by ``claim_ids`` are unclaimed (``c -> d``);
    their ``d`` already holds claim expiry + redelivery delay."""
    held = queries.of_claims(queue, project, claim_ids)
    driver.messages.update_many(held.filter, {
        '$set': {f.STATE: f.DELAYED},
        '$unset': {f.CLAIM: '', f.CLAIM_EXPIRES: ''}})


def release_orphans(driver, queue, project, now, batch):
    """Give back up to ``batch`` messages left claimed by a claim that no
    longer exists, once due again plus ORPHAN_AGE_MS (a claimer that died
    between handing them out and checking its claim; see claims.py).
    Returns how many claims were found gone."""
    query = queries.claimed_due(queue, project, now - ORPHAN_AGE_MS)
    held = driver.messages.find(query.filter, {f.CLAIM: True}, query.sort,
                                batch, query.index)
    claim_ids = {doc[f.CLAIM] for doc in held}
    if not claim_ids:
        return 0
    alive = {claim['_id'] for claim in driver.claims.find(
        {'_id': {'$in': list(claim_ids)}, f.ENDED: {'$exists': False}},
        {'_id': True})}
    gone = list(claim_ids - alive)
    if gone:
        give_back(driver, queue, project, gone)
    return len(gone)


def purge_expired(driver, queue, project, now, batch=PURGE_BATCH):
    """Delete up to ``batch`` expired messages (all when None); the
    groups whose head expired get their next one. Returns how many."""
    query = queries.expired(queue, project, now)
    purged = 0
    while True:
        found = driver.messages.find(
            query.filter, {'_id': True, f.GROUP: True}, query.sort,
            batch or SETTLE_BATCH, query.index)
        if not found:
            return purged
        purged += drop_expired(driver, queue, project, found, now)
        if batch is not None:
            return purged


def drop_expired(driver, queue, project, found, now):
    """Delete those of the documents ``found`` that expired by ``now``;
    their groups get their next head. Returns how many went."""
    query = queries.expired(queue, project, now)
    try:
        return driver.messages.delete_many(dict(
            query.filter, _id={'$in': [doc['_id'] for doc in found]})
        ).deleted_count
    finally:
        # Deleted first, advanced after, also when the delete's reply is
        # lost (pymongo never resends a deleteMany): the call's retry
        # finds them gone and would advance nothing. A crash in between
        # leaves groups without a head, which gc's groups.repair finds.
        groups.advance_all(driver, queue, project, groups.groups_of(found),
                           now)


def live_front(driver, messages, query, limit, now, projection=None,
               budget=EXPIRED_BUDGET):
    """Up to ``limit`` live documents of ``query``, in its order (position,
    ascending), read from the front of its index range without its
    ``e > now`` condition: MongoDB checks ``e`` only on the documents it
    fetches, so with that condition a read walked every expired message
    the purge batches had not reached yet, again on every read. Here the
    expired ones it meets are returned, deleted and read past, so none is
    examined twice; after ``budget`` of them (None: no bound, for a pop
    or a listing) it answers what it found, maybe nothing, and the next
    read goes on.
    ``messages``: the collection the caller reads through; a
    ``projection`` must keep ``e``, ``k`` and ``g``."""
    front = dict(query.filter)
    front.pop(f.EXPIRES, None)
    live, met, size = [], 0, limit
    while len(live) < limit:
        found = messages.find(front, projection, query.sort, size,
                              query.index)
        live += [doc for doc in found if doc[f.EXPIRES] > now]
        expired = [doc for doc in found if doc[f.EXPIRES] <= now]
        if expired:
            met += len(expired)
            drop_expired(driver, front[f.QUEUE], front[f.PROJECT], expired,
                         now)
        if len(found) < size or (budget is not None and met >= budget):
            break
        front[f.POSITION] = dict(front.get(f.POSITION, {}),
                                 **{'$gt': found[-1][f.POSITION]})
        size = max(limit - len(live), PURGE_BATCH)
    return live[:limit]


def live_claim(doc, now):
    """The id of the live claim holding ``doc``, or None."""
    if doc[f.STATE] == f.CLAIMED and doc.get(f.CLAIM_EXPIRES, 0) > now:
        return doc[f.CLAIM]
    return None


def render(doc, now, include_created=False, claim_count=None, claimed=True):
    """Zaqar's message dict for a stored document."""
    return controller.basic_message(
        doc['_id'], json.loads(doc[f.BODY]), doc[f.TTL], doc[f.CREATED],
        now, doc[f.POSITION],
        claim_id=live_claim(doc, now) if claimed else None,
        claim_count=doc[f.CLAIM_COUNT] if claim_count is None
        else claim_count, include_created=include_created,
        checksum=doc.get(f.CHECKSUM), delayed=queries.not_due(doc, now))
