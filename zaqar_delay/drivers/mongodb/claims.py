"""Claims on MongoDB: conditional updates that no two claimers can share.

A claim is a document in ``claims`` (the authority on when it ends) plus
the messages whose ``c`` names it. Handing out is a bulk pattern:

1. read up to ``limit`` ready ids in position order (``{p, q, s, k}``);
2. ``update_many`` those ids *with the filter still saying* ``s: r``, so
   each document flips ``r -> c`` once, atomically, for exactly one claim;
3. read back which of them now carry this claim id (``{c}``).

Ids that a concurrent claimer won are simply missing in step 3, and the
loop reads the next ready ids. Pop is a claim whose messages are deleted
right after step 3, so a crash between the two leaves them claimed (and
redelivered when the short pop claim ends), never lost; the delete names
the pop's claim, and a pop returns only what it removed under it
(_delete_popped).

Groups (groups.py): only a group's head is ever ``r``, so step 1 never
sees a blocked member, and the head this claim takes stays ``c`` while
the claim is built, so no other member of its group can become ready
meanwhile: one message per group per claim. Messages whose attempts ran
out are dead-lettered inside the loop, so the next member of their group
can still be handed out by the same claim (as Redis does). Pop deletes
its heads after the loop, and only then advances their groups: one
message per group per pop too.
"""

import json
import uuid

import pymongo

from zaqar_delay import controller
from zaqar_delay import errors
from zaqar_delay import rules
from zaqar_delay import sticky
from zaqar_delay.drivers.mongodb import fields as f
from zaqar_delay.drivers.mongodb import groups
from zaqar_delay.drivers.mongodb import pins
from zaqar_delay.drivers.mongodb import queries
from zaqar_delay.drivers.mongodb import reservations
from zaqar_delay.drivers.mongodb import retention
from zaqar_delay.drivers.mongodb import state

# Seconds a popped message stays claimed if the pop dies before deleting.
POP_CLAIM_TTL = 30
# Tries of a pop's delete before the pop fails (see _delete_popped).
POP_DELETE_ATTEMPTS = 3
# Dead letters a claim moves besides twice its limit before it answers
# short (_hand_out), as claim.lua's budget on Redis.
DEAD_LETTER_BATCH = 100
# Where a read-back carries the claim document it joined (_take_ready).
JOINED_CLAIM = 'zd_claim_doc'


class ClaimController(controller.ClaimController):

    def __init__(self, driver):
        super().__init__(driver)
        self._messages = driver.messages
        self._claims = driver.claims

    def _claim(self, queue, project, ttl, grace, limit, policy):
        return self.take(queue, project, limit, policy, 'claim', ttl, grace)

    def take(self, queue, project, limit, policy, mode, ttl=POP_CLAIM_TTL,
             grace=0):
        """Claim (or pop) up to ``limit`` due messages; dead-letter those
        whose attempts ran out. Returns (claim id, messages)."""
        now = self.driver.now()
        crowded = state.settle_if_due(self.driver, queue, project, now)
        # What retention no longer keeps is never handed out; a batch of
        # it goes first, so groups whose head it was move on.
        kept = retention.settle(self.driver, queue, project,
                                policy.retention, now)
        # Sticky queues: who this claim is for, and idle clients' groups
        # freed (pins.py).
        client = pins.settle(self.driver, queue, project, policy, now)
        claim_id = str(uuid.uuid4())
        expires = now + ttl * 1000
        # The claim document goes first: it is what ends the claim, so no
        # message can be claimed by a claim that will never end.
        self._claims.insert_one(f.queue_filter(queue, project, **{
            '_id': claim_id, f.TTL: ttl, f.EXPIRES: expires, 'g': grace,
            f.REDELIVERY: policy.redelivery_delay}))
        taken, live = self._hand_out(queue, project, now, claim_id,
                                     expires, grace, limit, policy, kept,
                                     client, bounded=mode != 'pop',
                                     crowded=crowded)
        if taken and not live and not (mode == 'pop' and len(taken) == 1) \
                and not self._still_live(claim_id):
            # A settle ended this claim while it was being built (its ttl
            # ran out meanwhile): nothing else will walk its messages, so
            # they go back now and the caller gets nothing. A pop of one
            # needs no such read: its delete names its claim, and its
            # count alone tells whether the message was still the pop's
            # (_delete_popped), where a batch's count cannot say which.
            state.give_back(self.driver, queue, project, [claim_id])
            self._claims.delete_one({'_id': claim_id})
            return claim_id, []
        if mode == 'pop' or not taken:
            if taken:
                # The pop's claim document is left to end by itself: the
                # next full settle of the queue removes it with the claims
                # that ended before it (state.settle_if_due), one batched
                # request for many pops instead of one each.
                popped = self._delete_popped(queue, project, claim_id,
                                             taken)
                if policy.sticky and client is None:
                    # Zaqar's purge: the groups it empties keep no pin.
                    pins.unpin_groups(self.driver, queue, project,
                                      groups.groups_of(popped))
                groups.advance_all(self.driver, queue, project,
                                   groups.groups_of(taken), now)
                taken = popped
            else:
                self._claims.delete_one({'_id': claim_id})
            return claim_id, [
                state.render(doc, now, claim_count=doc[f.CLAIM_COUNT] - 1,
                             claimed=False) for doc in taken]
        return claim_id, [state.render(doc, now) for doc in taken]

    def _still_live(self, claim_id):
        """Whether the claim document exists and no settle ended it."""
        return self._claims.find_one(
            {'_id': claim_id, f.ENDED: {'$exists': False}},
            {'_id': True}) is not None

    def _hand_out(self, queue, project, now, claim_id, expires, grace,
                  limit, policy, kept, client, bounded=True,
                  crowded=False):
        """Claim up to ``limit`` ready messages, dead-lettering those whose
        attempts ran out on the way. A ``bounded`` call (a claim) moves at
        most twice its limit and DEAD_LETTER_BATCH more, then answers what
        it has, as Redis's claim.lua does: the next claim goes on. A pop
        goes on until it has messages or none is ready (an empty pop reads
        as an empty queue, and Zaqar's purge stops at one). ``crowded``:
        expired messages may be left at the front (settle_if_due)."""
        redelivery = policy.redelivery_delay
        update = {
            '$set': {f.STATE: f.CLAIMED, f.CLAIM: claim_id,
                     f.CLAIM_EXPIRES: expires,
                     f.DUE: expires + redelivery * 1000,
                     f.REDELIVERY: redelivery},
            '$inc': {f.CLAIM_COUNT: 1},
            '$max': _kept_alive(now, expires, grace)}
        # Whether the claim was seen live after the last message it won
        # (read with that message: _take_ready).
        taken, live = [], False
        budget = 2 * limit + DEAD_LETTER_BATCH if bounded else None
        while len(taken) < limit and (budget is None or budget > 0):
            ready = queries.ready(queue, project, now, client)
            kept.restrict(ready.filter)
            won, drained, seen_live = self._take_ready(
                ready, limit - len(taken), claim_id, update, now, bounded,
                crowded)
            if won:
                live = seen_live
            exhausted, handed = [], []
            for doc in won:
                if (policy.max_claim_count
                        and doc[f.CLAIM_COUNT] > policy.max_claim_count):
                    exhausted.append(doc)
                else:
                    handed.append(doc)
            if client is not None:
                pins.pin(self.driver, queue, project, client, claim_id,
                         handed, now)
            taken += handed
            if exhausted:
                self._dead_letter(queue, project, policy, claim_id,
                                  exhausted, now)
                if budget is not None:
                    budget -= len(exhausted)
            elif drained:
                # Every message ready at ``now`` was a candidate: another
                # read could only find messages posted since. (A dead
                # letter may make its group's next member ready, or come
                # back to this very queue: then read again.)
                break
        taken.sort(key=lambda doc: doc[f.POSITION])
        return taken, live

    def _take_ready(self, ready, wanted, claim_id, update, now, bounded,
                    crowded):
        """Claim up to ``wanted`` of the messages ``ready`` finds; returns
        (the documents this claim won, in position order, whether fewer
        than ``wanted`` were ready, whether the claim was seen live after
        winning them).

        One wanted (a pop or claim of one, the last place of a batch) is
        one ``findAndModify`` that picks the oldest ready message itself,
        a retryable write. Its index is the planner's choice, as MongoDB
        4.2 takes no hint there: only ``zd_state_position`` gives the sort
        without reading the whole range, so it wins at the first message
        (tests/mongodb/test_indexes.py checks it on a real server). A
        sticky claim's range needs its hint (pins.py), so it reads its
        candidate first. More are a read of candidates (which deletes
        the expired messages it meets and reads past them, within a
        claim's budget: state.live_front), an ``update_many`` of those
        still ready, and a read of which ones this claim got, joined with
        the claim document (``$lookup`` by ``_id``): read after the
        update, it tells whether a settle ended the claim meanwhile
        (take), with no request of its own.

        While expired messages may be left at the front (``crowded``), one
        wanted is read as candidates too: ``findAndModify`` would walk
        them (its ``e`` is checked after the FETCH) and delete none."""
        if (wanted == 1 and ready.index == queries.READY_INDEX
                and not crowded):
            doc = self._messages.find_one_and_update(
                ready.filter, update, sort=ready.sort,
                return_document=pymongo.ReturnDocument.AFTER)
            return ([doc], False, False) if doc else ([], True, False)
        candidates = [doc['_id'] for doc in state.live_front(
            self.driver, self._messages, ready, wanted, now,
            {'_id': True, f.EXPIRES: True, f.POSITION: True,
             f.GROUP: True},
            state.EXPIRED_BUDGET if bounded else None)]
        if not candidates:
            return [], True, False
        if len(candidates) == 1:
            doc = self._messages.find_one_and_update(
                dict(ready.filter, _id=candidates[0]), update,
                return_document=pymongo.ReturnDocument.AFTER)
            return ([doc] if doc else []), wanted > 1, False
        self._messages.update_many(
            dict(ready.filter, _id={'$in': candidates}), update)
        won = self._messages.aggregate([
            {'$match': {f.CLAIM: claim_id, f.STATE: f.CLAIMED,
                        '_id': {'$in': candidates}}},
            {'$sort': {f.POSITION: 1}},
            {'$lookup': {'from': f.CLAIMS, 'localField': f.CLAIM,
                         'foreignField': '_id', 'as': JOINED_CLAIM}}])
        joined = [doc.pop(JOINED_CLAIM) for doc in won]
        live = bool(joined) and bool(joined[0]) and \
            f.ENDED not in joined[0][0]
        return won, len(candidates) < wanted, live

    def _dead_letter(self, queue, project, policy, claim_id, docs, now):
        """Move messages whose attempts ran out to the dead-letter queue.

        Each move is one conditional update of the document itself (new
        queue, new position, attempts reset, no longer a head), so a
        message is in exactly one queue at every instant; without a
        dead-letter queue the messages are dropped, as Zaqar does. Then
        the groups they leave, and those they join there, advance (a
        crash before that is repaired by gc: groups.repair).
        """
        held = {f.PROJECT: project, f.QUEUE: queue, f.CLAIM: claim_id,
                f.STATE: f.CLAIMED}
        dlq = policy.dead_letter_queue
        try:
            if dlq is None:
                self._messages.delete_many(dict(
                    held, _id={'$in': [doc['_id'] for doc in docs]}))
            else:
                self._move_to(dlq, project, policy, held, docs, now)
        finally:
            # Also when a reply is lost: the claim is retried, and finds
            # these messages gone, so it would advance nothing.
            groups.advance_all(self.driver, queue, project,
                               groups.groups_of(docs), now)

    def _move_to(self, dlq, project, policy, held, docs, now):
        dlq_policy = self.driver.message_controller.target_policy(dlq,
                                                                  project)
        first, token = reservations.reserve(self.driver, dlq, project,
                                            len(docs), now)
        joined, unused = [], []
        try:
            self._move_each(dlq, dlq_policy, policy, held, docs, now, first,
                            joined, unused)
        finally:
            # Also when a move's reply is lost (the claim's retry finds
            # the message gone from this queue): the groups it may have
            # joined there advance (advancing a group twice is harmless).
            groups.advance_all(self.driver, dlq, project, joined, now)
        # Every move answered (an interrupted one leaves the reservation
        # to go stale): the dead-letter queue's readers may pass them.
        reservations.release(self.driver, dlq, project, token, unused)

    def _move_each(self, dlq, dlq_policy, policy, held, docs, now, first,
                   joined, unused):
        for offset, doc in enumerate(docs):
            ttl = policy.dead_letter_ttl or doc[f.TTL]
            group = rules.group_or_none(json.loads(doc[f.BODY]),
                                        dlq_policy)
            changes = {f.QUEUE: dlq, f.POSITION: first + offset,
                       f.STATE: f.READY if group is None else f.BLOCKED,
                       f.CLAIM_COUNT: 0, f.CREATED: now, f.DUE: now,
                       f.TTL: ttl, f.EXPIRES: now + ttl * 1000}
            # A dead letter is no head there, nor pinned to anyone.
            removed = {f.CLAIM: '', f.CLAIM_EXPIRES: '', f.REDELIVERY: '',
                       f.HEAD: '', f.PIN: ''}
            if group is None:
                removed[f.GROUP] = ''
            else:
                changes[f.GROUP] = group
            # Counted as joined before the update: its reply may be lost
            # after it moved the message.
            joined.append(group)
            if not self._messages.update_one(
                    dict(held, _id=doc['_id']),
                    {'$set': changes, '$unset': removed}).matched_count:
                # Deleted, or no longer under this claim, meanwhile: it
                # never reached the dead-letter queue.
                joined.pop()
                unused.append(first + offset)

    def _delete_popped(self, queue, project, claim_id, taken):
        """Delete a pop's batch; return the part of it this pop removed
        under its own claim, never a message another consumer may hold.

        The delete names the pop's claim, so it removes only messages
        still under it: never handed to anyone else. A delete whose reply
        was lost is sent again (idempotent; pymongo does not retry
        multi-document writes itself); its retries may outlast the pop's
        claim, whose messages then go back and may be claimed again, so
        only a delete that answers for the whole batch returns it as is.
        Otherwise :meth:`_confirm_popped` tells which are gone for good.
        """
        mine = queries.of_claims(queue, project, [claim_id]).filter
        mine['_id'] = {'$in': [doc['_id'] for doc in taken]}
        for attempt in range(POP_DELETE_ATTEMPTS):
            try:
                deleted = self._messages.delete_many(mine).deleted_count
            except errors.BackendUnavailable:
                if attempt == POP_DELETE_ATTEMPTS - 1:
                    # Still claimed under the pop's short claim if the
                    # delete never happened: redelivered, not lost.
                    raise
                continue
            if deleted == len(taken):
                return taken
            break
        return self._confirm_popped(claim_id, taken)

    def _confirm_popped(self, claim_id, taken):
        """The messages of ``taken`` that are gone while the pop's claim
        never ended. Read in this order: a claim document still there and
        unmarked after the read means none of its messages was given back
        (state.end_claims marks first, and marks are never taken off), so
        each one gone by then went under this claim, handed to no one
        else; one still there is not this pop's (it comes back when the
        claim ends). Gone after the claim ended, a message may have been
        given back, claimed and deleted by another consumer: the pop
        cannot tell, so it fails rather than hand out a message twice."""
        left = {doc['_id'] for doc in self._messages.find(
            {'_id': {'$in': [doc['_id'] for doc in taken]}},
            {'_id': True})}
        gone = [doc for doc in taken if doc['_id'] not in left]
        if gone and not self._still_live(claim_id):
            raise errors.BackendUnavailable(
                backend='MongoDB', reason='the claim of a pop ended before '
                'its delete was confirmed; its messages were not returned')
        return gone

    def _get_claim(self, queue, project, claim_id):
        now = self.driver.now()
        claim = self._claims.find_one(f.queue_filter(queue, project, **{
            '_id': str(claim_id), f.EXPIRES: {'$gt': now}}))
        if claim is None:
            return None
        held = queries.of_claims(queue, project, [claim['_id']])
        docs = self._messages.find(held.filter, None, held.sort,
                                   hint=held.index)
        messages = [state.render(doc, now) for doc in docs
                    if state.live_claim(doc, now) == claim['_id']
                    and doc[f.EXPIRES] > now]
        ttl = claim[f.TTL]
        meta = {'id': claim['_id'], 'ttl': ttl,
                'age': max(0, (now - (claim[f.EXPIRES] - ttl * 1000))
                           // 1000)}
        return meta, messages

    def _renew(self, queue, project, claim_id, ttl, grace):
        now = self.driver.now()
        expires = now + ttl * 1000
        # Claim document first, then its messages: a message's claim
        # expiry never outlives the document that ends the claim.
        claim = self._claims.find_one_and_update(
            f.queue_filter(queue, project, **{
                '_id': str(claim_id), f.EXPIRES: {'$gt': now},
                f.ENDED: {'$exists': False}}),
            {'$set': {f.TTL: ttl, f.EXPIRES: expires, 'g': grace}},
            projection={f.REDELIVERY: True})
        if claim is None:
            return False
        pins.touch(self.driver, queue, project, sticky.current_client(), now)
        redelivery = claim.get(f.REDELIVERY, 0)
        held = queries.of_claims(queue, project, [claim['_id']])
        self._messages.update_many(held.filter, {
            '$set': {f.CLAIM_EXPIRES: expires,
                     f.DUE: expires + redelivery * 1000},
            '$max': _kept_alive(now, expires, grace)})
        return True

    def _release(self, queue, project, claim_id):
        now = self.driver.now()
        where = f.queue_filter(queue, project, _id=str(claim_id))
        claim = self._claims.find_one(where, {f.REDELIVERY: True})
        if claim is None:
            return
        redelivery = claim.get(f.REDELIVERY, 0)
        held = queries.of_claims(queue, project, [claim['_id']])
        back = {f.CLAIM: '', f.CLAIM_EXPIRES: ''}
        # Live messages are due after the redelivery delay from now; any
        # whose claim already lapsed keep d = claim expiry + that delay.
        self._messages.update_many(
            dict(held.filter, **{f.CLAIM_EXPIRES: {'$gt': now}}),
            {'$set': {f.STATE: f.DELAYED, f.DUE: now + redelivery * 1000},
             '$unset': back})
        self._messages.update_many(held.filter, {
            '$set': {f.STATE: f.DELAYED}, '$unset': back})
        self._claims.delete_one(where)


def _kept_alive(now, expires, grace):
    """``$max`` that keeps claimed messages alive until the claim ends plus
    grace, their visible ttl grown to the claim's ttl + grace when that is
    longer, as Zaqar's drivers do."""
    return {f.EXPIRES: expires + grace * 1000,
            f.TTL: (expires - now) // 1000 + grace}
