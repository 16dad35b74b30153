"""Messages on MongoDB: one document each (layout in fields.py).

Posting takes positions from the queue's counter document with one
update, which also records them until the insert is answered (the horizon
of persistent reads: reservations.py), and inserts the documents; every
state change after that is a single-document conditional update (see
claims.py), and every read settles the queue first (state.settle), so a
state read from a document is exact at the operation's "now". Grouped
messages are inserted blocked and their groups advanced (groups.py);
whatever removes messages advances their groups afterwards.
"""

from pymongo import errors as mongo_errors
from zaqar.storage import errors as storage_errors

from zaqar_delay import controller
from zaqar_delay import errors
from zaqar_delay import sticky
from zaqar_delay.drivers.mongodb import carried
from zaqar_delay.drivers.mongodb import clock
from zaqar_delay.drivers.mongodb import connection
from zaqar_delay.drivers.mongodb import consumers as consumer_state
from zaqar_delay.drivers.mongodb import fields as f
from zaqar_delay.drivers.mongodb import given_up
from zaqar_delay.drivers.mongodb import group_moves
from zaqar_delay.drivers.mongodb import groups
from zaqar_delay.drivers.mongodb import metadata
from zaqar_delay.drivers.mongodb import pins
from zaqar_delay.drivers.mongodb import queries
from zaqar_delay.drivers.mongodb import reservations
from zaqar_delay.drivers.mongodb import retention as kept_by
from zaqar_delay.drivers.mongodb import state

# Times a post takes fresh positions after a collision before giving up.
INSERT_ATTEMPTS = 5
# How long a deleted queue's position counter is kept (_purge_queue).
POSITIONS_KEPT_MS = 86400 * 1000
# Messages a queue deletion deletes per request.
PURGE_BATCH = 1000
# Fields a get's pipeline adds to each message: the queue's key in
# queue_meta, and that document.
JOINED_KEY = '_zd_meta_key'
JOINED = '_zd_meta'


class MessageController(controller.MessageController):

    STICKY_GROUPS = True

    def __init__(self, driver):
        super().__init__(driver)
        self._messages = driver.messages

    def _check_sizes(self, messages):
        limit = self.driver.store_conf.max_body_size
        for index, message in enumerate(messages):
            size = len(message.body_json.encode('utf-8'))
            if size > limit:
                raise errors.InvalidInput(
                    'message {} body is {} bytes; the MongoDB driver stores '
                    'bodies of at most {} bytes (option max_body_size in '
                    '[{}])'.format(index, size, limit,
                                   self.driver.OPTIONS.GROUP_NAME))

    def _insert(self, queue, project, messages, client_uuid):
        self._check_sizes(messages)
        now = self.driver.now()
        pending = list(messages)
        for _ in range(INSERT_ATTEMPTS):
            first, token = reservations.reserve(self.driver, queue, project,
                                                len(pending), now)
            docs = [self.document(queue, project, message, client_uuid,
                                  now, first + offset)
                    for offset, message in enumerate(pending)]
            pending = self._insert_docs(queue, project, pending, docs, token)
            if not pending:
                break
        else:
            raise errors.BackendUnavailable(
                backend='MongoDB', reason='positions kept colliding while '
                'posting to {}; nothing of the failed part was stored'
                .format(queue))
        # Inserted blocked, then advanced: a crash in between leaves a new
        # group without a head until gc's groups.repair gives it one.
        # Only on a sticky queue may a new group already have a pin (its
        # client stays active between its messages).
        groups.advance_all(self.driver, queue, project,
                           [message.group for message in messages], now,
                           pinned=any(message.sticky for message in messages))

    def _insert_docs(self, queue, project, messages, docs, token):
        """Insert ``docs`` at the positions reserved under ``token``;
        return the messages to insert again.

        A duplicate ``_id`` already stored in this project is a retried
        post, skipped as Redis' post.lua skips existing ids, its position
        given up (given_up.py: no consumer counts it as lost). Any other
        duplicate key is a position taken meanwhile (a post racing a queue
        purge got positions from the purged counter): those messages are
        returned, to be stored under fresh positions, never acknowledged
        and dropped.
        """
        try:
            self._messages.insert_many(docs, ordered=False)
        except mongo_errors.BulkWriteError as refused:
            return self._refused(queue, project, messages, docs, token,
                                 refused)
        self._release(queue, project, token, docs, [])
        return []

    def _refused(self, queue, project, messages, docs, token, refused):
        """_insert_docs after the server refused part of ``docs``."""
        failed = (refused.details or {}).get('writeErrors', [])
        if not connection.refused_as_duplicates(refused):
            self._release(queue, project, token, docs, [
                error['index'] for error in failed
                if error.get('code') != connection.DUPLICATE_KEY])
            raise errors.BackendUnavailable(backend='MongoDB',
                                            reason=refused)
        indexes = [error['index'] for error in failed]
        stored = self._stored(project, [docs[i]['_id'] for i in indexes])
        # A stored id leaves its position empty; any other duplicate's
        # position holds another message.
        self._release(queue, project, token, docs,
                      [i for i in indexes if docs[i]['_id'] in stored])
        return [messages[i] for i in indexes if docs[i]['_id'] not in stored]

    def _release(self, queue, project, token, docs, unused):
        # The server answered: what it did not store now, it never will,
        # so the positions stop holding persistent reads back, and those
        # left ``unused`` (indexes into ``docs``) are given up. Without
        # an answer (anything else raised) the insert may still land, and
        # the reservation holds until it goes stale.
        reservations.release(self.driver, queue, project, token,
                             [docs[i][f.POSITION] for i in unused])

    def carried_in(self, queue, project, message_ids):
        return carried.before(self.driver, project, list(message_ids))

    def carry_in(self, queue, project, messages, client_uuid):
        # Run again, a move brings nothing twice: an id carried in before
        # is skipped even once a consumer deleted it (carried.py), and
        # one stored without that record takes no second position.
        remembered = carried.before(self.driver, project,
                                    [message.id for message in messages])
        fresh = [message for message in messages
                 if message.id not in remembered]
        if not fresh:
            return
        stored = self._stored(project, [message.id for message in fresh])
        missing = [message for message in fresh if message.id not in stored]
        if missing:
            self._insert(queue, project, missing, client_uuid)
        carried.remember(self.driver, project, fresh, self.driver.now())

    def _stored(self, project, message_ids):
        """Those of ``message_ids`` stored in ``project`` (any queue)."""
        return {doc['_id'] for doc in self._messages.find(
            {'_id': {'$in': message_ids}, f.PROJECT: project},
            {'_id': True})}

    @staticmethod
    def document(queue, project, message, client_uuid, now, position):
        created = now - message.age_ms
        due = created + message.delay * 1000
        doc = f.queue_filter(queue, project, **{
            '_id': message.id, f.POSITION: position,
            f.STATE: (f.WAITING if message.group is not None and due > now
                      else f.BLOCKED if message.group is not None
                      else f.DELAYED if due > now else f.READY),
            f.BODY: message.body_json, f.TTL: message.ttl,
            f.CREATED: created, f.EXPIRES: created + message.ttl * 1000,
            f.DUE: due,
            f.CLIENT: client_uuid, f.CLAIM_COUNT: 0})
        if message.group is not None:
            doc[f.GROUP] = message.group
        if message.checksum:
            doc[f.CHECKSUM] = message.checksum
        return doc

    def _list(self, queue, project, marker, limit, echo, client_uuid,
              include_claimed, include_delayed, retention):
        now = self.driver.now()
        if include_claimed or include_delayed:
            # Shows what a claim that ended becomes (c -> d) at once.
            state.settle(self.driver, queue, project, now)
        else:
            state.settle_if_due(self.driver, queue, project, now)
        kept = kept_by.settle(self.driver, queue, project, retention, now)
        states = [f.READY, f.BLOCKED]
        if include_claimed:
            states.append(f.CLAIMED)
        if include_delayed:
            states.append(f.DELAYED)
        query = queries.page(queue, project, now, marker, states,
                             None if echo else client_uuid)
        if include_claimed:
            docs = self._find_kept(query, kept, limit)
        else:
            kept.restrict(query.filter)
            # No budget: an empty page would end a client's paging while
            # messages follow; each expired message met is deleted, so
            # the work is batched and never repeated.
            docs = state.live_front(self.driver, self._messages, query,
                                    limit, now, budget=None)
        return ([state.render(doc, now) for doc in docs],
                docs[-1][f.POSITION] if docs else None)

    def _first(self, queue, project, sort, retention):
        now = self.driver.now()
        state.settle(self.driver, queue, project, now)
        kept = kept_by.settle(self.driver, queue, project, retention, now)
        doc = self._due(queue, project, now, sort, kept)
        return state.render(doc, now, include_created=True) if doc else None

    def _due(self, queue, project, now, sort, kept):
        found = self._find_kept(queries.due_now(queue, project, now, sort),
                                kept, 1)
        return found[0] if found else None

    def _find_kept(self, query, kept, limit=0):
        """Up to ``limit`` (0: all) documents ``query`` matches that
        ``kept`` keeps, in its order. The query may match claimed
        messages, kept whatever their age or position: read apart
        (retention.Window.kept_or_held), so no index range walks what the
        window hides."""
        found = []
        for where, index in kept.kept_or_held(query.filter, query.index):
            found += self._messages.find(where, None, query.sort, limit,
                                         index)
        if query.sort:
            found.sort(key=lambda doc: doc[f.POSITION],
                       reverse=query.sort[0][1] < 0)
        return found[:limit] if limit else found

    def _count_kept(self, where, kept, index=None):
        """How many messages ``where`` matches that ``kept`` keeps,
        claimed ones whatever their age or position (as _find_kept)."""
        return sum(self._messages.count_documents(
            part, **({'hint': hint} if hint else {}))
            for part, hint in kept.kept_or_held(where, index))

    def _get_by_ids(self, queue, project, message_ids):
        """One request when the queue keeps every live message: the
        messages, each with the queue's metadata copy joined to it. No
        message found needs no metadata (a get on a queue that does not
        exist is MessageDoesNotExist too); no usable copy, or retention
        to apply, reads again as other backends do."""
        copies = self.driver.metadata_copies
        wanted = [mid for mid in message_ids if isinstance(mid, str)]
        if copies is None or not wanted:
            return super()._get_by_ids(queue, project, message_ids)
        now = self.driver.now()
        query = queries.by_ids(queue, project, wanted)
        query.filter[f.EXPIRES] = {'$gt': now}
        docs = self._messages.aggregate([
            {'$match': query.filter},
            {'$addFields': {JOINED_KEY: {
                '$literal': metadata.key(queue, project)}}},
            {'$lookup': {'from': f.QUEUE_META, 'localField': JOINED_KEY,
                         'foreignField': '_id', 'as': JOINED}}])
        if not docs:
            return []
        joined = docs[0][JOINED]
        copy, _ = copies.read(joined[0] if joined else None, queue,
                              project)
        if copy is None:
            return super()._get_by_ids(queue, project, wanted)
        kept = self.retention_for(queue, project, copy)
        if not kept_by.keeps_everything(kept):
            return self._get_many(queue, project, wanted, kept)
        by_id = {doc['_id']: doc for doc in docs}
        return [state.render(by_id[mid], now) for mid in wanted
                if mid in by_id]

    def _get_many(self, queue, project, message_ids, retention):
        wanted = [mid for mid in message_ids if isinstance(mid, str)]
        if not wanted:
            return []
        now = self.driver.now()
        query = queries.by_ids(queue, project, wanted)
        query.filter[f.EXPIRES] = {'$gt': now}
        kept = kept_by.window(self.driver, queue, project, retention, now)
        by_id = {doc['_id']: doc for doc in self._find_kept(query, kept)}
        return [state.render(by_id[mid], now) for mid in wanted
                if mid in by_id]

    def _delete(self, queue, project, message_id, claim_id):
        if not isinstance(message_id, str):
            return
        now = self.driver.now()
        target = f.queue_filter(queue, project, _id=message_id)
        if claim_id is not None:
            condition = {f.STATE: f.CLAIMED, f.CLAIM: str(claim_id),
                         f.CLAIM_EXPIRES: {'$gt': now}}
        else:
            condition = {'$or': [{f.STATE: {'$ne': f.CLAIMED}},
                                 {f.CLAIM_EXPIRES: {'$lte': now}}]}
        deleted = self._delete_one(dict(target, **condition), now)
        if deleted is not None:
            # Only a pinned head's delete can keep a sticky client active:
            # a delete elsewhere sends no request for it.
            if f.PIN in deleted:
                pins.touch(self.driver, queue, project,
                           sticky.current_client(), now)
            return
        doc = self._messages.find_one(target)
        if doc is None:
            return
        if doc[f.EXPIRES] <= now:
            self._delete_one(dict(target, e={'$lte': now}), now)
            return
        live = state.live_claim(doc, now)
        if claim_id is None:
            raise storage_errors.MessageIsClaimed(message_id)
        if live is None:
            raise storage_errors.MessageNotClaimed(message_id)
        raise storage_errors.MessageNotClaimedBy(message_id, claim_id)

    def _delete_one(self, where, now):
        """Delete one message; its group advances if it was the head.
        (A crash in between is repaired by gc: groups.repair.) Returns
        what it deleted (its head and pin fields), None if nothing."""
        doc = self._messages.find_one_and_delete(
            where, projection={f.HEAD: True, f.PIN: True})
        if doc is not None and f.HEAD in doc:
            groups.advance(self.driver, where[f.QUEUE], where[f.PROJECT],
                           doc[f.HEAD], now, pinned=f.PIN in doc)
        return doc

    def _bulk_delete(self, queue, project, message_ids, claim_ids):
        wanted = [mid for mid in message_ids if isinstance(mid, str)]
        if not wanted:
            return
        query = queries.by_ids(queue, project, wanted)
        now = self.driver.now()
        pins.touch(self.driver, queue, project, sticky.current_client(), now)
        if claim_ids:
            foreign = dict(query.filter, **{
                f.STATE: f.CLAIMED, f.CLAIM_EXPIRES: {'$gt': now},
                f.EXPIRES: {'$gt': now},
                f.CLAIM: {'$nin': [str(cid) for cid in claim_ids]}})
            if self._messages.find_one(foreign, {'_id': True}) is not None:
                raise storage_errors.ClaimDoesNotMatch(
                    ','.join(claim_ids), queue, project)
        # Groups read before, advanced after: a blocked member deleted
        # here may have become its group's head in between.
        grouped = self._messages.find(dict(query.filter, **{
            f.GROUP: {'$exists': True}}), {f.GROUP: True})
        try:
            self._messages.delete_many(query.filter)
        finally:
            # Also when its reply is lost (pymongo never resends a
            # delete_many): the client's retry finds nothing left to
            # delete, so it would advance nothing.
            groups.advance_all(self.driver, queue, project,
                               groups.groups_of(grouped), now)

    def _pop(self, queue, project, limit, policy):
        return self.driver.claim_controller.take(
            queue, project, limit, policy, mode='pop')[1]

    def _purge_queue(self, queue, project):
        where = f.queue_filter(queue, project)
        self._delete_messages(where)
        self.driver.claims.delete_all(where)
        self.driver.moves.delete_all(where)
        self._keep_positions_only(where)
        given_up.forget_queue(self.driver, queue, project)
        pins.forget_queue(self.driver, queue, project)
        # Last: a consumer reading before the messages are gone would
        # move its cursor on again.
        consumer_state.restart(self.driver, queue, project)

    def _delete_messages(self, where):
        """Delete the queue's messages PURGE_BATCH at a time, from the
        front of the position index: no one request's work grows with
        the queue."""
        while True:
            edge = self._messages.find(
                where, {f.POSITION: True, '_id': False}, [(f.POSITION, 1)],
                1, 'zd_position', skip=PURGE_BATCH - 1)
            if not edge:
                self._messages.delete_many(where)
                return
            self._messages.delete_many(dict(where, **{
                f.POSITION: {'$lte': edge[0][f.POSITION]}}))

    def _keep_positions_only(self, where):
        """Reset the queue's counter document to its last position and
        the reservations of writers still at work, kept a day (``x``):
        the queue created again goes on from it, so a call that read
        positions before the deletion and writes after it (a consumer's
        page storing its cursor, a cleanup's read-by-all cut, a post that
        reserved its positions) names positions below every message of
        the queue created again, not some of them; gc clears ``x`` once
        the queue holds messages again (DataDriver._gc_queue)."""
        expires = clock.as_date(self.driver.now() + POSITIONS_KEPT_MS)
        self.driver.counters.update_one(where, {
            '$set': {'x': expires},
            '$unset': {f.GROUP_CURSOR: '', f.REMOVED: '',
                       f.LENGTH_FLOOR: '', f.READ_FLOOR: ''}})

    def _stats(self, queue, project, retention):
        now = self.driver.now()
        state.settle(self.driver, queue, project, now, purge_batch=None)
        kept = kept_by.settle(self.driver, queue, project, retention, now)
        count = self._messages.count_documents

        def visible(query):
            return self._count_kept(query.filter, kept)

        total = visible(queries.live(queue, project, now))
        claimed = count(queries.in_state(queue, project, f.CLAIMED).filter)
        delayed = count(kept.restrict(queries.in_state(
            queue, project, f.DELAYED).filter))
        # Counted, never fetched (a distinct of every group id outgrows
        # MongoDB's 16 MB reply): a group has exactly one head, and only
        # heads are ever claimed. Expired messages are gone after the full
        # settle above.
        stats = {'total': total, 'claimed': claimed, 'delayed': delayed,
                 'free': total - claimed - delayed,
                 'groups': visible(queries.heads(queue, project)),
                 'groups_in_flight': count(queries.grouped(
                     queue, project, f.CLAIMED).filter)}
        # Zaqar expects oldest and newest whenever total is not zero, so
        # they cover delayed messages too (as the Redis driver does).
        oldest = self._any(queue, project, now, 1, kept)
        if oldest:
            # A delete between the two reads may have taken the last
            # message: the oldest was then the newest one there.
            newest = self._any(queue, project, now, -1, kept) or oldest
            stats['oldest'] = _stat_entry(oldest, now)
            stats['newest'] = _stat_entry(newest, now)
        # Pinned groups: those left after freeing a batch of an idle
        # client's (beyond it, an idle client's pins count until later
        # claims free them), as on Redis.
        pins.free_idle(self.driver, queue, project, now)
        pinned = pins.count(self.driver, queue, project)
        if pinned:
            stats['groups_pinned'] = pinned
        stats['removed_by_retention'] = kept_by.removed(self.driver, queue,
                                                        project)
        return stats

    # Persistent consumers: state in the subscription (consumers.py).
    def _consumer(self, queue, project, consume_id):
        return consumer_state.one(self.driver, queue, project, consume_id)

    def _list_unless_consumer(self, queue, project, marker, limit, echo,
                              client_uuid, include_claimed, include_delayed,
                              retention):
        # The copy just read for ``retention`` may tell that the queue has
        # no persistent consumer: then the client is none.
        copies = self.driver.metadata_copies
        if copies is not None and copies.without_consumers(queue, project):
            return None, self._list(queue, project, marker, limit, echo,
                                    client_uuid, include_claimed,
                                    include_delayed, retention)
        return super()._list_unless_consumer(
            queue, project, marker, limit, echo, client_uuid,
            include_claimed, include_delayed, retention)

    def _consumers(self, queue, project):
        return consumer_state.every(self.driver, queue, project)

    def _live_readers(self, queue, project, idle=True, need=None):
        return consumer_state.live_readers(self.driver, queue, project,
                                           self._idle_s, idle)

    def _consumer_register(self, queue, project, consume_id):
        # The state is created with the subscription document it lives
        # in (subscriptions.create); register_consumer only validates.
        pass

    def _consumer_forget(self, queue, project, consume_id):
        # The state goes with its subscription document.
        pass

    def _consumer_update(self, queue, project, consume_id, ack, handed,
                         lost):
        consumer_state.update(self.driver, queue, project, consume_id, ack,
                              handed, lost)

    def _reserved_from(self, queue, project):
        return reservations.settled_horizon(self.driver, queue, project,
                                            self.driver.now())

    def _given_up(self, queue, project, after, before):
        return given_up.between(self.driver, queue, project, after, before)

    def _count_after(self, queue, project, position, retention):
        # Counted on the position index from the cursor on: the lag,
        # never what the consumer already acknowledged.
        now = self.driver.now()
        where = queries.live(queue, project, now).filter
        if position is not None:
            where[f.POSITION] = {'$gt': position}
        return self._count_kept(where, kept_by.window(
            self.driver, queue, project, retention, now), 'zd_position')

    def _clean(self, queue, project, retention, batch):
        now = self.driver.now()
        return kept_by.remove(
            self.driver, queue, project,
            kept_by.window(self.driver, queue, project, retention, now),
            now, batch)

    def _any(self, queue, project, now, sort, kept):
        found = self._find_kept(queries.any_live(queue, project, now, sort),
                                kept, 1)
        return found[0] if found else None

    def _groups(self, queue, project, marker, limit):
        now = self.driver.now()
        state.settle(self.driver, queue, project, now, purge_batch=None)
        # Every message retention no longer keeps goes first, as every
        # expired one does, so depths and heads are what reads see.
        kept_by.settle(self.driver, queue, project,
                       self.retention_of(queue, project), now, whole=True)
        return groups.page(self.driver, queue, project, marker, limit, now)

    def _purge_group(self, queue, project, group):
        return groups.purge(self.driver, queue, project, group,
                            self.driver.now())

    def _unpin_group(self, queue, project, group):
        return pins.unpin(self.driver, queue, project, group)

    def _move_group(self, queue, project, group, target):
        # Members retention no longer keeps are removed, not carried
        # into the target as new messages.
        kept_by.settle(self.driver, queue, project,
                       self.retention_of(queue, project), self.driver.now(),
                       whole=True)
        return group_moves.move(self.driver, queue, project, group, target,
                                self.policy(target, project))

    def gc(self, queue, project, batch, group_cursor=None):
        """Settle one queue and drop up to ``batch`` expired messages;
        give back up to ``batch`` messages whose claim is gone; free a
        batch of an idle sticky client's groups (pins.py); give back its
        stale position reservations; finish its stale group moves;
        forget the given-up positions no consumer can count any more;
        repair the heads of up to groups.REPAIR_BATCH groups after
        ``group_cursor``."""
        now = self.driver.now()
        dropped = state.settle(self.driver, queue, project, now,
                               purge_batch=batch)
        state.release_orphans(self.driver, queue, project, now, batch)
        # Pins must not outlive their client on a queue nobody claims on.
        pins.free_idle(self.driver, queue, project, now)
        reservations.forget_stale(self.driver, queue, project, now)
        group_moves.finish_stale(self.driver, queue, project, now)
        self._prune_given_up(queue, project, now)
        cursor = groups.repair(self.driver, queue, project, now,
                               group_cursor)
        if cursor != group_cursor:
            self.driver.counters.update_one(
                f.queue_filter(queue, project),
                {'$set': {f.GROUP_CURSOR: cursor}} if cursor is not None
                else {'$unset': {f.GROUP_CURSOR: ''}})
        return dropped


    def _prune_given_up(self, queue, project, now):
        counter = self.driver.counters.find_one(
            f.queue_filter(queue, project),
            {'n': True, f.RESERVATIONS: True})
        oldest = self._messages.find(
            f.queue_filter(queue, project), {f.POSITION: True},
            [(f.POSITION, 1)], 1, 'zd_position')
        given_up.prune(self.driver, queue, project, given_up.lowest_countable(
            self.driver, queue, project, counter,
            oldest[0][f.POSITION] if oldest else None))


def _stat_entry(doc, now):
    message = state.render(doc, now, include_created=True)
    return {'id': message['id'], 'age': message['age'],
            'created': message['created']}
