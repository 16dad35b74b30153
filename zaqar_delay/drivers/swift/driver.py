"""The Swift data driver (``message_store = delay.swift``).

Swift has no clock an API node can read, so "now" is the API node's own
clock (``time.time()``), taken once per operation; see docs/swift.md for
what that and Swift's other limits mean for each guarantee.
"""

import functools
import time

from oslo_log import log as logging
from zaqar.common import decorators
from zaqar.storage import base as storage

from zaqar_delay import driver as base
from zaqar_delay import errors
from zaqar_delay import layout as shared_layout
from zaqar_delay.conf import swift as swift_conf
from zaqar_delay.drivers.swift import carried
from zaqar_delay.drivers.swift import claims
from zaqar_delay.drivers.swift import connection
from zaqar_delay.drivers.swift import drafts
from zaqar_delay.drivers.swift import fences
from zaqar_delay.drivers.swift import gc_lease
from zaqar_delay.drivers.swift import group_admin
from zaqar_delay.drivers.swift import groups
from zaqar_delay.drivers.swift import layout
from zaqar_delay.drivers.swift import messages
from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import pins
from zaqar_delay.drivers.swift import pops
from zaqar_delay.drivers.swift import retention
from zaqar_delay.drivers.swift import state
from zaqar_delay.drivers.swift import strays
from zaqar_delay.drivers.swift import subscriptions
from zaqar_delay.drivers.swift import summary

LOG = logging.getLogger(__name__)

# gc(): how long a message may keep a pop or dead-letter lock before gc
# takes it for abandoned (the node died midway) and finishes the job.
GC_ABANDONED_S = 60


class DataDriver(base.DataDriver):

    BASE_CAPABILITIES = (storage.Capabilities.FIFO,
                         storage.Capabilities.CLAIMS,
                         storage.Capabilities.AOD,
                         storage.Capabilities.DURABILITY)

    OPTIONS = swift_conf
    _DRIVER_OPTIONS = base.DataDriver.driver_options(swift_conf)
    MESSAGE_CONTROLLER = messages.MessageController
    CLAIM_CONTROLLER = claims.ClaimController
    SUBSCRIPTION_CONTROLLER = subscriptions.SubscriptionController

    def __init__(self, conf, cache, control_driver):
        super().__init__(conf, cache, control_driver)
        self._clock = None
        self._gc_lease = None

    @decorators.lazy_property(write=False)
    def store(self):
        store = connection.Store(self.store_conf)
        if self.check_layout:
            layout.check(store)
        return store

    def recheck_layout(self):
        # exclusive_gc checked before it took the lease it now holds.
        if self.check_layout and self._gc_lease is None:
            layout.check(self.store)

    def now_ms(self):
        """Epoch ms from the API node's clock (Swift has none to read)."""
        if self._clock is not None:
            return int(self._clock())
        return int(time.time() * 1000)

    def use_clock(self, clock):
        """Tests only: take "now" (epoch ms) from ``clock()``; ``None``
        restores the API node's clock."""
        self._clock = clock

    def queue_state(self, queue, project):
        container = names.container(names.MESSAGES, queue, project)
        meta = {'project': project or '', 'queue': queue}
        self.store.queue_meta(container, meta)
        return state.QueueState(self.store, container,
                                self.store_conf.expiry_margin, meta)

    def is_alive(self):
        return self.store.alive()

    def close(self):
        if 'store' in self.__dict__:
            self.store.close()

    def gc(self):
        """Zaqar's gc hook (``zaqar-gc``, pooling's gc of every pool):
        :meth:`exclusive_gc`, except that a pass another host is running
        is not an error here: that pass does the work, and Zaqar's own
        callers must not fail (nor stop before their other pools) for it."""
        try:
            return self.exclusive_gc()
        except errors.GcPassRunning as exc:
            LOG.info('%s', exc)
            return base.GcPass()

    def exclusive_gc(self):
        """Settle every queue: redeliver expired claims, promote due
        messages, delete expired ones, finish abandoned pops and moves,
        remove drafts of posts cut short, repair groups left without a
        filed head, delete the locks of removed messages, then remove
        what retention no longer keeps (clean_queue). A queue where none
        of that can be due gets a light pass (summary.py). One pass at a
        time per Swift account (gc_lease.py): a pass that finds another
        one running raises errors.GcPassRunning and does nothing."""
        # Before the lease: a host that cannot read this layout must not
        # hold back the passes of those that can, nor have its mismatch
        # taken for another host's pass running.
        if self.check_layout:
            layout.check(self.store)
        lease = gc_lease.GcLease(self.store)
        lease.acquire()
        self._gc_lease = lease
        try:
            dropped = self.gc_each(
                ('queue container {!r}'.format(container),
                 functools.partial(self._gc_and_clean, container))
                for container in self.store.containers(
                    names.container_prefix(names.MESSAGES)))
        finally:
            self._gc_lease.release()
            self._gc_lease = None
        LOG.debug('gc dropped %d expired messages', dropped)
        return dropped

    def queues(self):
        # One HEAD per queue: a container's name may hold a hash of the
        # project, its metadata always holds the real names.
        for container in self.store.containers(
                names.container_prefix(names.MESSAGES)):
            meta = self.store.container_meta(container) or {}
            if 'queue' in meta:
                yield meta.get('project') or None, meta['queue']

    def upgrade_layout(self, say):
        """What inserts before 2026-12-06 carried in with its age gets
        the marks retention's cleanup finds it by (carried.mark_unmarked),
        queue by queue; then the account gets the layout version this
        code reads."""
        found = layout.version(self.store)
        shared_layout.refuse_later('Swift', found, layout.CURRENT,
                                   layout.WHERE)
        queues = messages_marked = 0
        for project, queue in self.queues():
            marked, written = carried.mark_unmarked(
                self.queue_state(queue, project))
            queues += 1
            messages_marked += marked
            if marked:
                say('Swift queue {!r} of project {!r}: marked {} messages '
                    'carried in without a mark ({} marks)'.format(
                        queue, project or '', marked, written))
        if found < layout.CURRENT:
            layout.write(self.store, layout.CURRENT)
            say('Swift layout upgraded from version {} to {}'.format(
                found, layout.CURRENT))
        say('Swift layout is version {}: {} queues read, {} messages '
            'carried in marked'.format(layout.CURRENT, queues,
                                       messages_marked))

    def gc_heartbeat(self):
        if self._gc_lease is not None:
            self._gc_lease.keep()

    def _gc_and_clean(self, container):
        # The queue's names first: its removals are marked for its
        # persistent consumers' lost count (consumers.any_consumer).
        meta = self.store.container_meta(container) or {}
        dropped = self._gc_queue(container, meta)
        if 'queue' in meta:
            self.clean_queue(meta['queue'], meta.get('project') or None)
            qs = state.QueueState(self.store, container,
                                  self.store_conf.expiry_margin, meta)
            # Only after _gc_queue finished every abandoned removal.
            retention.fold(qs, self.now_ms())
            retention.prune_cuts(qs)
        return dropped

    def _gc_queue(self, container, meta=None):
        now = self.now_ms()
        qs = state.QueueState(self.store, container,
                              self.store_conf.expiry_margin, meta)
        qs.settle(now)
        last = summary.read(qs)
        if summary.quiet(qs, last, now, GC_ABANDONED_S):
            return 0
        expired, positions, highest = [], {}, None
        listed = [fields for fields in map(
            names.position_fields, self.store.listing_all(container, 'p/'))
            if fields is not None]
        for fields in drafts.live_positions(qs, listed):
            positions[fields['id']] = fields
            if fields['e'] <= now:
                expired.append((fields['id'], fields['pos'], None,
                                fields['g']))
        if listed:
            highest = listed[-1]['pos']
        removed, left = self._remove_expired(qs, expired, positions, now)
        # Heads filed for a sticky client count as filed (pins.py).
        pinned = pins.gc_pass(qs, now)
        delayed, members, ready, locks = drafts.indexes(qs)
        locks, more = _drop_leaked_locks(qs, locks, positions, now)
        more |= left
        latest = self._finish_abandoned(qs, container, locks, positions,
                                        now)
        filed = drafts.filed_ids(delayed, members, ready, locks)
        more |= drafts.clean(qs, positions, filed, now) >= \
            state.SETTLE_BATCH
        groups.repair(qs, now, positions, latest, members,
                      delayed + ready + pinned)
        last_sweep = summary.swept(last, now)
        if now >= last_sweep + strays.SWEEP_EVERY_S * 1000:
            left = (strays.sweep(qs, positions, now)
                    | (fences.prune(qs) >= fences.PRUNE_BATCH))
            more |= left
            last_sweep = 0 if left else now
        summary.write(qs, now, highest, positions, filed, more, last_sweep)
        return removed

    def _remove_expired(self, qs, expired, positions, now):
        """Remove expired messages SETTLE_BATCH at a time, this pass's
        lease checked between batches; a visit stops after VISIT_STEPS
        of them (the queue is visited again after the others: gc_each),
        so one tenant's mass expiry does not hold gc from the rest.
        Returns (how many went, whether some are left)."""
        done = steps = 0
        while done < len(expired):
            batch = expired[done:done + state.SETTLE_BATCH]
            qs.remove(batch, now)
            for victim in batch:
                positions.pop(victim[0], None)
            done, steps = done + len(batch), steps + 1
            if done < len(expired):
                self.gc_heartbeat()
                if not self.gc_may_go_on(steps):
                    break
        return done, done < len(expired)

    def _finish_abandoned(self, qs, container, locks, positions, now):
        """Finish dead-letter moves and group moves whose node died
        midway, and settle pops that failed (pops.py); returns the latest
        lock of each locked message. ``positions``: id -> ``p/`` fields."""
        latest = {}
        for entry in locks:
            message_id, attempt = names.parse_lock(entry['name'])
            if attempt > latest.get(message_id, (0,))[0]:
                latest[message_id] = (attempt, entry)
        self._heal_orphans(qs, latest, now)
        stale = [(mid, entry) for mid, (_, entry) in latest.items()
                 if summary.abandoned(entry, now, GC_ABANDONED_S)]
        if not stale:
            return latest
        meta = self.store.container_meta(container) or {}
        if 'queue' not in meta:
            return latest
        project, queue = meta.get('project') or None, meta['queue']
        for message_id, entry in stale:
            message, missing = qs.lookup(message_id, now)
            fields = positions.get(message_id)
            if missing and fields is not None:
                # A removal whose bulk delete took the message but not
                # its lock and position: finish it.
                qs.remove([(message_id, fields['pos'], None, fields['g'])],
                          now)
            if message is None:
                continue
            params = names.ct_params(entry.get('content_type'))
            if params['c'] == names.DEAD:
                policy = self.message_controller.lenient_policy(queue,
                                                                project)
                self.claim_controller.dead_letter(qs, policy, project,
                                                  [message], now)
            elif params['c'] == names.MOVE:
                group_admin.finish_move(self, qs, project, message,
                                        (entry['name'], params), now)
            elif params['c'] == names.RETAIN:
                retention.drop(qs, [dict(
                    id=message.id, pos=message.pos, g=message.gk,
                    e=message.expires)], now)
            else:
                pops.abandoned(qs, message, names.parse_lock(
                    entry['name'])[1], params.get('o'), now)
        return latest

    def _heal_orphans(self, qs, latest, now):
        """Backstop for clock skew beyond the claim safety margin: a
        message whose latest lock names a claim that no longer exists, long
        after any redelivery delay, is made claimable again."""
        cache = {}
        bound = GC_ABANDONED_S + self.message_controller._limits[
            'max_message_delay']
        for message_id, (attempt, entry) in latest.items():
            holder = names.ct_params(entry.get('content_type')).get('c')
            if (holder is None or holder in names.TAKEN
                    or summary.age_s(entry, now) <= bound
                    or qs.claim_record(holder, cache) is not None):
                continue
            message = qs.message(message_id, now)
            if message is not None:
                qs.make_available(message.pos, message_id, attempt + 1, now,
                                  now, message.gk, message.client)


def _drop_leaked_locks(qs, locks, positions, now):
    """Delete the locks of messages that are gone (a retention removal's
    ``ret`` lock, kept as a tombstone against a retried PUT, or a lock
    taken while a remover ran), once every lock of the message is older
    than GC_ABANDONED_S: at most SETTLE_BATCH messages per pass, each one
    HEAD of ``m/`` first (a message whose ``p/`` a bulk delete took but
    not its ``m/`` keeps its locks). ``positions``: id -> ``p/`` fields
    of the messages listed. Returns the locks left and whether more may
    be leaked."""
    by_id = {}
    for entry in locks:
        by_id.setdefault(names.parse_lock(entry['name'])[0], []).append(
            entry)
    suspects = [mid for mid, entries in by_id.items()
                if mid not in positions and all(
                    summary.age_s(e, now) > GC_ABANDONED_S for e in entries)]
    more = len(suspects) > state.SETTLE_BATCH
    suspects = suspects[:state.SETTLE_BATCH]
    gone = {mid for mid, found in zip(suspects, qs.store.parallel(
        lambda mid: qs.store.head(qs.c, names.message_obj(mid)), suspects))
        if found is None}
    qs.store.delete_many(qs.c, [e['name'] for mid in gone
                                for e in by_id[mid]])
    return [e for e in locks
            if names.parse_lock(e['name'])[0] not in gone], more

