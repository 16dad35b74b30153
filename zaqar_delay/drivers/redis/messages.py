"""Messages on Redis: each operation is one Lua script (see lua/)."""

import json
import uuid

from zaqar.storage import errors as storage_errors

from zaqar_delay import consumers
from zaqar_delay import controller
from zaqar_delay import errors
from zaqar_delay import retention as retention_mod
from zaqar_delay import sticky
from zaqar_delay.drivers.redis import keys
from zaqar_delay.drivers.redis import outbox
from zaqar_delay.drivers.redis import wire

# Ids purged per purge.lua call when a queue is deleted (each script call
# stays short; see lua/_common.lua on bounded work).
PURGE_BATCH = 100
# Messages clean.lua removes per call: a cleanup batch of
# tuples_per_iteration (1000 by default) is several calls, so no one call
# keeps Redis from other tenants longer than any other script.
CLEAN_SCRIPT_BATCH = 100
# Consumers readers.lua takes out of its indexes per call at most (idle
# ones, expired subscriptions, ones registered before the indexes).
READERS_BATCH = 100
# Consumers listed per consumers.lua call.
CONSUMERS_PAGE = 100

_DELETE_ERRORS = {
    1: storage_errors.MessageNotClaimed,
    3: storage_errors.MessageIsClaimed,
}


class MessageController(controller.MessageController):

    STICKY_GROUPS = True

    def __init__(self, driver):
        super().__init__(driver)
        self._run = driver.run_script
        # (queue, project) -> groups whose abandoned move a gc visit ran
        # out of steps to finish: the queue's next visit goes on with them.
        self._moves_left = {}

    def _insert(self, queue, project, messages, client_uuid, left_at=None):
        """Store copies (dead letters, a moved group's batch); those from
        an outbox that entered it at ``left_at`` (ms) or before: an id
        that left this queue after that was stored here by this copy (its
        reply lost, or made again by gc), and is skipped."""
        self._store(queue, project, messages, client_uuid,
                    '0' if left_at is None else 'copy:{}'.format(left_at))

    def _insert_new(self, queue, project, messages, client_uuid):
        self._store(queue, project, messages, client_uuid, '1')
        return [message.id for message in messages]

    def carry_in(self, queue, project, messages, client_uuid):
        self._store(queue, project, messages, client_uuid, 'carry')

    def carried_in(self, queue, project, message_ids):
        carried = keys.queue_prefix(queue, project) + ':carried'
        ids = list(message_ids)
        scores = self.driver.pipelined(
            lambda pipe: [pipe.zscore(carried, mid) for mid in ids]) \
            if ids else []
        return {mid for mid, score in zip(ids, scores)
                if score is not None}

    def _store(self, queue, project, messages, client_uuid, mode):
        """post.lua in ``mode`` (its ARGV[6]): '1' for ids this call made
        up, whose first attempt skips the per-id checks only a retry
        needs (its retries: 'retry'); 'carry' for a move's messages;
        'copy:<ms>' for outbox copies (_insert); '0' otherwise."""
        per_message = []
        for message in messages:
            per_message += [message.id, message.ttl, message.delay,
                            message.body_json, message.group or '',
                            message.checksum or '', message.age_ms]
        member = keys.queue_tag(queue, project)
        on_cluster = self.driver.on_cluster
        registry = '' if on_cluster else keys.QUEUE_REGISTRY
        if on_cluster:
            # Registered first, in its own round trip: the registry lives
            # in another Redis Cluster slot than the queue, and once the
            # post has stored anything gc must know the queue, even if the
            # reply is lost and the retry never comes. A post that found
            # the queue empty registers it again afterwards: it may have
            # raced the queue's deletion, whose purge unregisters the
            # queue after emptying it (see _purge_queue), and gc must
            # still find it. Elsewhere post.lua registers the queue in
            # the same atomic step.
            self.driver.register_queue(queue, project)
        _, was_empty = self.driver.run_attempts(
            'post', queue, project, lambda first: [
                client_uuid, registry, member,
                mode if first or mode != '1' else 'retry', *per_message])
        if was_empty and on_cluster:
            self.driver.register_queue(queue, project)

    def _list(self, queue, project, marker, limit, echo, client_uuid,
              include_claimed, include_delayed, retention):
        return self._listing(queue, project, marker, limit, echo,
                             client_uuid, include_claimed, include_delayed,
                             retention, unless_consumer=False)[1]

    def _list_unless_consumer(self, queue, project, marker, limit, echo,
                              client_uuid, include_claimed, include_delayed,
                              retention):
        # Zaqar names the client on every listing: the first list.lua call
        # also answers whether it is a persistent consumer.
        return self._listing(queue, project, marker, limit, echo,
                             client_uuid, include_claimed, include_delayed,
                             retention, unless_consumer=True)

    def _listing(self, queue, project, marker, limit, echo, client_uuid,
                 include_claimed, include_delayed, retention,
                 unless_consumer):
        # Each list.lua call reads a bounded number of ids; a page that
        # filters many out is assembled from several calls.
        page, next_marker, after = [], None, marker
        while True:
            now, last, flat, resume, *consumer = self._run(
                'list', queue, project, '' if after is None else after,
                limit - len(page), int(include_claimed),
                int(include_delayed), int(echo), client_uuid or '',
                *retention_args(retention), int(unless_consumer))
            if consumer:
                return _consumers_from(consumer[0])[0], None
            unless_consumer = False
            page += wire.messages(now, flat)
            if last:
                next_marker = int(last)
            if len(page) >= limit or not resume:
                return None, (page, next_marker)
            after = int(resume)

    def _first(self, queue, project, sort, retention):
        now, flat = self._run('first', queue, project, sort,
                              *retention_args(retention))
        found = wire.messages(now, flat, include_created=True)
        return found[0] if found else None

    def _get_many(self, queue, project, message_ids, retention):
        if not message_ids:
            return []
        now, flat = self._run('get', queue, project,
                              *retention_args(retention), *message_ids)
        return wire.messages(now, flat)

    def _delete(self, queue, project, message_id, claim_id):
        code = self._run('delete', queue, project, message_id, claim_id or '',
                         self.driver.deleted_id_memory_ms,
                         sticky.current_client() or '')
        if code == 2:
            raise storage_errors.MessageNotClaimedBy(message_id, claim_id)
        if code in _DELETE_ERRORS:
            raise _DELETE_ERRORS[code](message_id)

    def _bulk_delete(self, queue, project, message_ids, claim_ids):
        if not message_ids:
            return
        claim_ids = claim_ids or []
        result = self._run('bulk_delete', queue, project,
                           self.driver.deleted_id_memory_ms,
                           sticky.current_client() or '', len(claim_ids),
                           *claim_ids, *message_ids)
        if result[0] == 1:
            raise storage_errors.ClaimDoesNotMatch(
                ','.join(claim_ids), queue, project)

    def _pop(self, queue, project, limit, policy):
        # An empty pop reads as an empty queue (Zaqar's purge stops at
        # one): it never answers empty for a bound of its work.
        return self.driver.claim_controller.take(
            queue, project, limit, policy, mode='pop', until_found=True)[1]

    def _purge_queue(self, queue, project):
        token = str(uuid.uuid4())
        while self._run('purge', queue, project, PURGE_BATCH, token):
            pass
        self.driver.unregister_queue(queue, project)
        # A post that landed after the last purge call but registered the
        # queue before the line above: its messages must stay known to gc.
        if self.driver.has_messages(queue, project):
            self.driver.register_queue(queue, project)

    def _stats(self, queue, project, retention):
        (now, total, claimed, delayed, oldest, newest, groups,
         groups_in_flight, removed, pinned) = self._run(
             'stats', queue, project, *retention_args(retention))
        stats = {'total': total, 'claimed': claimed, 'delayed': delayed,
                 'free': total - claimed - delayed, 'groups': groups,
                 'groups_in_flight': groups_in_flight}
        if pinned:
            stats['groups_pinned'] = pinned
        if oldest:
            stats['oldest'] = _stat_entry(now, oldest)
            stats['newest'] = _stat_entry(now, newest)
        stats['removed_by_retention'] = removed
        return stats

    # -- persistent consumers (lua/consumer*.lua, count_after.lua) ----------

    def _consumer(self, queue, project, consume_id):
        now, found, _ = self._consumers_of(queue, project, consume_id)
        return now, (found[0] if found else None)

    def _consumers(self, queue, project):
        # In pages (one script call each stays short however many
        # consumers the queue has); for the operator's listing and tests.
        every, rank = [], 0
        while True:
            now, found, rank = self._consumers_of(queue, project, '', rank)
            every += found
            if rank is None:
                return now, every

    def _consumers_of(self, queue, project, consume_id, rank=0):
        now, flat, next_rank = self._run('consumers', queue, project,
                                         consume_id, rank, CONSUMERS_PAGE)
        return now, _consumers_from(flat), _position(next_rank)

    def _live_readers(self, queue, project, idle=True, need=None):
        # From indexes, a few reads however many consumers (readers.lua);
        # a call that reached its bound of consumers to take out of them
        # is made again.
        while True:
            _, done, live, subscribed, lowest = self._run(
                'readers', queue, project, self._idle_s * 1000,
                READERS_BATCH)
            if done:
                return live, _position(lowest), subscribed - live

    def _consumer_subscribed(self, queue, project, consume_id, expires_ms):
        self._run('consumer_subscribed', queue, project, consume_id,
                  expires_ms)

    def _consumer_register(self, queue, project, consume_id):
        self._run('consumer_register', queue, project, consume_id)

    def _consumer_forget(self, queue, project, consume_id):
        self._run('consumer_forget', queue, project, consume_id)

    def _consumer_update(self, queue, project, consume_id, ack, handed,
                         lost):
        self._run('consumer_update', queue, project, consume_id,
                  '' if ack is None else ack,
                  '' if handed is None else handed, lost)

    def _count_after(self, queue, project, position, retention):
        return self._run('count_after', queue, project,
                         '' if position is None else position,
                         *retention_args(retention))

    def _clean(self, queue, project, retention, batch):
        args = retention_args(retention)
        if not any(args):
            # Nothing to remove by retention: no store call at all, so gc
            # costs queues without retention nothing more.
            return 0, False
        # ``batch`` bounds what the calls look at, not what they remove:
        # expired messages a step drops on the way are not removals, and a
        # run of them must not keep one call going (gc's visit counts
        # calls of this, VISIT_STEPS).
        removed = looked = 0
        while True:
            step = min(CLEAN_SCRIPT_BATCH, batch - looked)
            done, more = self._run('clean', queue, project, *args, step,
                                   self.driver.deleted_id_memory_ms)
            removed += done
            looked += step
            if not more or looked >= batch:
                return removed, bool(more)

    def _groups(self, queue, project, marker, limit):
        flat = self._run('groups', queue, project, marker or '', limit,
                         *retention_args(self.retention_of(queue, project)))
        return [{'id': json.loads(flat[i]), 'depth': flat[i + 1],
                 'head': wire.text(flat[i + 2]),
                 'in_flight': bool(flat[i + 3]),
                 'client': wire.text(flat[i + 4]) or None}
                for i in range(0, len(flat), 5)]

    def _unpin_group(self, queue, project, group):
        return wire.text(self._run(
            'group_unpin', queue, project, group, str(uuid.uuid4()),
            self.driver.retry_span_ms, keeps_result=True)) or None

    def _purge_group(self, queue, project, group):
        # In batches from the tail (group_purge.lua): each call is short.
        total = 0
        while True:
            deleted, left = self._run(
                'group_purge', queue, project, group, str(uuid.uuid4()),
                self.driver.retry_span_ms, keeps_result=True)
            total += deleted
            if not deleted or not left:
                return total

    def _move_group(self, queue, project, group, target):
        result = self._move_step(queue, project, group, target, 'start')
        if result[0] == 1:
            raise errors.GroupInFlight(group=group, queue=queue)
        if result[0] == 2:
            raise errors.GroupMoving(group=group, queue=queue,
                                     target=wire.text(result[1]))
        return self._finish_move(queue, project, group, result)

    def _finish_move(self, queue, project, group, result):
        """Copy each batch of a move to its target before taking the
        next, so the target receives the group in order."""
        total = 0
        while True:
            _, ids, done = result
            moved = [wire.text(mid) for mid in ids]
            outbox.transfer(self.driver, queue, project, moved)
            total += len(moved)
            if done:
                return total
            result = self._move_step(queue, project, group, '', 'continue')

    def _move_step(self, queue, project, group, target, step):
        """One group_move.lua step; a retry after its reply was lost gets
        the batch the step took (its token's kept result)."""
        return self._run('group_move', queue, project, group, target, step,
                         str(uuid.uuid4()), self.driver.retry_span_ms,
                         keeps_result=True)

    def gc(self, queue, project, batch, outbox_age_ms):
        """Settle one queue in bounded steps until nothing is left (in a
        gc pass, until the visit's bound: driver.gc_may_go_on); finish
        dead-letter copies and group moves a crashed node left midway."""
        total = steps = 0
        moves = self._moves_left.pop((queue, project), [])
        while True:
            dropped, abandoned, stale, more = self._run(
                'gc', queue, project, batch, outbox_age_ms,
                self.driver.deleted_id_memory_ms)
            total += dropped
            outbox.transfer(self.driver, queue, project,
                            [wire.text(mid) for mid in abandoned])
            moves += [group for group in stale if group not in moves]
            steps += 1
            # A move step per visit step: a large group's move must not
            # hold the visit (each step refreshes the move, so it would
            # not be found stale again for a while: remembered instead).
            while moves and self.driver.gc_may_go_on(steps):
                _, ids, done = self._move_step(queue, project, moves[0], '',
                                               'continue')
                outbox.transfer(self.driver, queue, project,
                                [wire.text(mid) for mid in ids])
                steps += 1
                if done:
                    moves.pop(0)
            if moves:
                self._moves_left[(queue, project)] = moves
                return total
            if not more or not self.driver.gc_may_go_on(steps):
                return total


def _consumers_from(flat):
    """Consumers from consumers.lua's wire list (5 fields each)."""
    return [consumers.Consumer(
        consume_id=wire.text(flat[i]), cursor=_position(flat[i + 1]),
        handed=_position(flat[i + 2]), lost=int(flat[i + 3]),
        last_active_ms=int(flat[i + 4]))
        for i in range(0, len(flat), 5)]


def retention_args(retention):
    """The three ARGV values by which scripts learn a queue's retention:
    time in ms and length, 0 for no limit (both 0 when inactive), and the
    read-by-all cut: '' when the queue has no ``consumers_required`` (its
    stored floor is then not applied either), -1 when nothing is read by
    all now (the floor still is)."""
    if retention is None:
        return 0, 0, ''
    cut = ''
    if (retention.policy == retention_mod.CLEANUP
            and retention.consumers_required is not None):
        cut = -1 if retention.read_cut is None else retention.read_cut
    return retention.time_ms, retention.kept_length, cut


def _position(value):
    return None if value in (b'', '', None) else int(value)


def _stat_entry(now, flat):
    message = wire.messages(now, flat, include_created=True)[0]
    return {'id': message['id'], 'age': message['age'],
            'created': message['created']}


