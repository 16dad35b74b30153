"""Messages on Swift (layout and fields: names.py; storing a post's
messages: posts.py)."""

import functools
import itertools
import logging

from zaqar.storage import errors as storage_errors

from zaqar_delay import controller
from zaqar_delay import errors
from zaqar_delay import sticky
from zaqar_delay.drivers.swift import carried
from zaqar_delay.drivers.swift import claims as swift_claims
from zaqar_delay.drivers.swift import consumers as swift_consumers
from zaqar_delay.drivers.swift import drafts
from zaqar_delay.drivers.swift import fences
from zaqar_delay.drivers.swift import group_admin
from zaqar_delay.drivers.swift import groups
from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import pins
from zaqar_delay.drivers.swift import posts
from zaqar_delay.drivers.swift import readers
from zaqar_delay.drivers.swift import retention as swift_retention
from zaqar_delay.drivers.swift import scan
from zaqar_delay.drivers.swift import state as swift_state

LOG = logging.getLogger(__name__)

# A queue's deletion lists and deletes this many objects at a time, and
# tries PURGE_ROUNDS times to delete the emptied container.
PURGE_PAGE = 10000
PURGE_ROUNDS = 5


class MessageController(controller.MessageController):

    STICKY_GROUPS = True

    def __init__(self, driver):
        super().__init__(driver)
        self._store = driver.store
        self._consumers_store = swift_consumers.Consumers(driver)
        self._readers = readers.Readers(
            self._consumers_store, driver.store_conf.read_cut_index_from)

    def _state(self, queue, project):
        return self.driver.queue_state(queue, project)

    # -- post --------------------------------------------------------------

    def carry_in(self, queue, project, messages, client_uuid):
        # As copies: each leaves an r/ marker that outlives its expiry, so
        # a consumed one is never stored again by a later run.
        self._insert(queue, project, messages, client_uuid, copies=True)

    def carried_in(self, queue, project, message_ids):
        container = self._state(queue, project).c
        ids = list(message_ids)
        found = self._store.parallel(
            lambda mid: self._store.head(container, names.received_obj(mid)),
            ids)
        return {mid for mid, head in zip(ids, found) if head is not None}

    def _insert_new(self, queue, project, messages, client_uuid):
        return self._insert(queue, project, messages, client_uuid)

    def _insert(self, queue, project, messages, client_uuid, copies=False):
        """Store ``messages``: position, message, the mark of those carried
        in with their age (carried.py), group entry, and only then the
        filing that makes it exist (drafts.py). With ``copies``
        (dead letters, moved groups) each leaves an ``r/`` marker, and one
        that has a marker already is skipped unless it is still here: gc
        finishing a move that a dead node left midway must not bring back
        a copy its consumer deleted since, nor drop one cut short. Other
        messages are a post's, which made up their ids: one may get a new
        id (posts.py). Returns the ids stored, in order."""
        now = self.driver.now_ms()
        qs = self._state(queue, project)
        # Only on a sticky queue can a new head already have a pin; copies
        # (dead letters, moved groups) arrive free whatever the target.
        qs.sticky = any(m.sticky for m in messages)
        stored = [swift_state.Message(m.id, {}, {
            'b': m.body, 't': m.ttl, 'cr': now - m.age_ms,
            'e': now - m.age_ms + m.ttl * 1000,
            'd': now - m.age_ms + m.delay * 1000, 'u': client_uuid,
            'p': None, 'g': m.group, 'cs': m.checksum}) for m in messages]
        try:
            kept = [m for m, ok in zip(
                stored, posts.store(qs, stored, now, copies)) if ok]
            carried.mark(qs, kept, now)
            self._store.parallel(
                lambda m: qs.make_available(m.pos, m.id, 1, m.due, now,
                                            client=m.client),
                [m for m in kept if m.group is None])
            groups.join(qs, [m for m in kept if m.group is not None], now)
        except errors.BackendUnavailable:
            # A copy's call is run again (gc finishes moves): its drafts
            # are what that run completes.
            if not copies:
                drafts.withdraw(qs, stored, now)
            raise
        return [m.id for m in stored]

    # -- reads -------------------------------------------------------------

    def _list(self, queue, project, marker, limit, echo, client_uuid,
              include_claimed, include_delayed, retention):
        now = self.driver.now_ms()
        qs = self._state(queue, project)
        keep = swift_retention.horizon(qs, retention, now,
                                       flights=include_claimed)
        budget = scan.Scan(limit)
        if include_claimed or include_delayed:
            found = self._list_all(qs, now, marker, limit, include_claimed,
                                   include_delayed, echo, client_uuid, keep,
                                   budget)
        else:
            qs.settle(now)
            if self._store.listing(qs.c, 'g/', limit=1):
                # Blocked members are listed too, but only heads are in a/.
                found = self._list_all(qs, now, marker, limit, False, False,
                                       echo, client_uuid, keep, budget)
            else:
                found = self._list_available(qs, now, marker, limit, echo,
                                             client_uuid, keep, budget)
        return found, budget.next_marker(found, limit)

    def _pages(self, qs, prefix, marker, limit, reverse=False):
        """Listing pages after a position, growing like Redis' list."""
        after = None if marker is None else prefix + names.pos(marker) + '0'
        chunk = limit
        while True:
            page = self._store.listing(qs.c, prefix, marker=after,
                                       limit=chunk, reverse=reverse)
            if not page:
                return
            yield page
            if len(page) < chunk:
                return
            after = page[-1]['name']
            chunk = min(chunk * 2, 1000)

    def _list_available(self, qs, now, marker, limit, echo, client_uuid,
                        keep, budget):
        out = []
        pages = self._pages(qs, 'a/', keep.after(marker), limit)
        # A message filed twice (a stale filing of an earlier attempt
        # beside its latest) is listed once, by its latest attempt on the
        # page, and never again on a later page.
        seen = set()
        for page in budget.pages(pages):
            latest = {}
            for entry in page:
                pos, message_id, attempt = names.parse_entry(entry['name'])
                if pos not in seen and (pos not in latest
                                        or attempt > latest[pos][2]):
                    latest[pos] = (entry, message_id, attempt)
            seen.update(latest)
            candidates = []
            for pos, (entry, message_id, attempt) in latest.items():
                poster = names.ct_params(entry.get('content_type')).get('u')
                own = not echo and poster == client_uuid
                candidates.append(
                    (pos, None if own else (pos, message_id, attempt)))
            wanted = budget.affordable(candidates)
            found = self._store.parallel(
                lambda item: qs.message(item[1], now), wanted)
            for (pos, message_id, attempt), message in zip(wanted, found):
                if (message is None or message.pos != pos
                        or not keep.keeps(pos, message.created)
                        or not (echo or message.client != client_uuid)):
                    continue
                out.append(message.render(now, claim_count=attempt - 1))
                if len(out) == limit:
                    return out
            if budget.spent:
                break
        return out

    def _list_all(self, qs, now, marker, limit, include_claimed,
                  include_delayed, echo, client_uuid, keep, budget):
        out, cache = [], {}

        def read(message_id):
            message = qs.message(message_id, now)
            if message is None:
                return None
            held = qs.claim_of(message_id, now, cache)
            if not drafts.is_filed(qs, message, held[0], now):
                return None
            return message, held

        def page_of(candidates):
            """True once the page is full or the budget is spent."""
            wanted = budget.affordable(candidates)
            for found in self._store.parallel(read, wanted):
                if found is None:
                    continue
                message, (count, claim_id) = found
                if claim_id and not include_claimed:
                    continue
                if not (claim_id or keep.keeps(message.pos,
                                               message.created)):
                    continue
                if not (echo or message.client != client_uuid):
                    continue
                out.append(message.render(now, claim_id, count))
                if len(out) == limit:
                    return True
            return budget.spent

        if include_claimed and keep.cut:
            # Claimed messages below the retention cut are still shown,
            # in order before everything from the cut on.
            early = sorted((pos, mid) for mid, pos in keep.in_flight.items()
                           if pos < keep.cut and (marker is None
                                                  or pos > marker))
            if page_of(early):
                return out
        pages = self._pages(qs, 'p/', keep.after(marker), limit)
        for page in budget.pages(pages):
            candidates = []
            for entry in page:
                fields = names.position_fields(entry)
                if fields is not None:
                    candidates.append((fields['pos'], fields['id'] if
                                       _worth_reading(fields, now, keep,
                                                      include_delayed,
                                                      echo, client_uuid)
                                       else None))
            if page_of(candidates):
                return out
        return out

    def _settled_prefix(self, queue, project, start, page, retention):
        # Read after the page: a post that took a position below its last
        # message and has not filed it yet (a draft younger than
        # DRAFT_AGE_S, drafts.py) shows up here as a kept p/ entry the page
        # does not hold, even if it was filed between the page's listing
        # and this one. The page stops before it; the next one gets it. A
        # post whose position lands after this listing finds the page's
        # fence, written first, and moves after it (fences.py).
        if not page:
            return page
        now = self.driver.now_ms()
        qs = self._state(queue, project)
        last = page[-1].position
        # The fence's PUT goes with the retention cut's reads, which run
        # on this thread so that theirs stay parallel.
        fence = qs.store.in_background(
            functools.partial(fences.raise_to, qs, last, start))
        keep = swift_retention.horizon(qs, retention, now, flights=True)
        drop_old_fence = fence.result()
        young = now - drafts.DRAFT_AGE_S * 1000
        held = {message['id'] for message in page}

        def first_draft():
            for entries in self._pages(qs, 'p/', keep.after(start),
                                       len(page)):
                for entry in entries:
                    fields = names.position_fields(entry)
                    if fields is None or fields['id'] in held:
                        continue
                    if fields['pos'] > last:
                        return None
                    if (fields['e'] > now and fields['w'] > young and (
                            fields['id'] in keep.in_flight
                            or keep.keeps(fields['pos'], fields['cr']))):
                        return fields['pos']
            return None

        draft, _ = qs.store.parallel(lambda call: call(),
                                     [first_draft, drop_old_fence])
        if draft is None:
            return page
        return [m for m in page if m.position < draft]

    def _first(self, queue, project, sort, retention):
        now = self.driver.now_ms()
        qs = self._state(queue, project)
        keep = swift_retention.horizon(qs, retention, now, flights=True)
        # Claimed messages below the retention cut come before the rest
        # (oldest first) or after it (newest first).
        early = sorted(((pos, mid) for mid, pos in keep.in_flight.items()
                        if pos < keep.cut), reverse=sort == -1)
        early = [{'id': mid, 'pos': pos} for pos, mid in early]

        def walk():
            marker = keep.after(None) if sort == 1 else None
            pages = self._pages(qs, 'p/', marker, 10, reverse=sort == -1)
            for fields in swift_retention.down_to_cut(
                    itertools.chain.from_iterable(pages), keep):
                if (fields['e'] <= now or fields['d'] > now or not (
                        fields['id'] in keep.in_flight
                        or keep.keeps(fields['pos'], fields['cr']))):
                    continue
                yield fields

        for fields in (itertools.chain(early, walk()) if sort == 1
                       else itertools.chain(walk(), early)):
            message = qs.message(fields['id'], now)
            if message is None or message.pos != fields['pos']:
                continue
            count, claim_id = qs.claim_of(message.id, now)
            if not drafts.is_filed(qs, message, count, now):
                continue
            if (message.due > now or not (
                    claim_id or keep.keeps(message.pos, message.created))):
                continue
            return message.render(now, claim_id, count,
                                  include_created=True)
        return None

    def _get_many(self, queue, project, message_ids, retention):
        now = self.driver.now_ms()
        qs = self._state(queue, project)
        cache = {}

        keep = swift_retention.horizon(qs, retention, now)

        def read(message_id):
            found = qs.message_with_claim(message_id, now, cache)
            if found is None:
                return None
            message, count, claim_id = found
            if not drafts.is_filed(qs, message, count, now):
                return None
            if not (claim_id or keep.keeps(message.pos, message.created)):
                return None
            return message.render(now, claim_id, count)

        return [m for m in self._store.parallel(read, message_ids) if m]

    # -- deletes -----------------------------------------------------------

    def _pin_cut(self, queue, project, qs, now):
        """Before messages leave: store the length cut they leave behind,
        so what it drops stays gone (retention.py)."""
        swift_retention.horizon(qs, self.retention_of(queue, project), now)

    def _targets(self, queue, project, qs, message_ids, now, claim_ids=()):
        """(message, claim count, live claim id) of each live message.
        Their locks are read in one parallel round with what the removal
        needs (the length cut, whether the queue has consumers) and, when
        the caller names no claim, the messages, with the first lock
        missing from a listing asked for by name (Listings that lag,
        latest_lock): the usual delete needs no second round.

        Naming a claim, the caller usually holds the first attempt: its
        lock is asked for by name (a HEAD costs Swift less than a
        listing). When that lock is a named claim's and says the claim
        lives past the claim safety margin, the message is the caller's:
        no node whose clock is within the margin can have ended that
        claim, and nobody takes a later attempt while it lives; the lock
        holds what the removal needs (position, group key; names.py,
        ``l/``), and a lock goes only with its message, or in a delete of
        that claim cut short, which this one finishes. Neither the
        message, the claim's record nor the next lock is read. Otherwise
        the next lock is asked for, the locks listed when it exists, and
        the record decides, read after the round, as is any other
        message."""
        cache = {}
        count = len(message_ids)
        reads = ([functools.partial(qs.store.head, qs.c,
                                    names.lock_obj(mid, 1))
                  for mid in message_ids] if claim_ids else
                 [functools.partial(qs.store.listing, qs.c,
                                    names.lock_prefix(mid))
                  for mid in message_ids]
                 + [functools.partial(qs.store.head, qs.c,
                                      names.lock_obj(mid, 1))
                    for mid in message_ids]
                 + [functools.partial(qs.message, mid, now)
                    for mid in message_ids])
        found = self._store.parallel(lambda read: read(), reads + [
            lambda: self._pin_cut(queue, project, qs, now),
            qs.has_consumers])[:len(reads)]
        if claim_ids:
            firsts, probes, unread = found, [None] * count, [_UNREAD] * count
        else:
            firsts, probes, unread = (found[:count], found[count:2 * count],
                                      found[2 * count:])
        margin = now + swift_claims.SAFETY_MS

        def target(item):
            message_id, listed, probed, message = item
            if message is None:
                return None
            if claim_ids:
                held = listed and _held_by_lock(
                    message_id, names.ct_params(
                        listed.get('content-type')), claim_ids, margin)
                if held:
                    return held, 1, held.claim_id
                listed, asked = _first_locks(qs, message_id, listed)
            else:
                asked = (1, probed)
            attempts, lock = qs.latest_lock_fields(message_id, listed,
                                                   asked)
            held = _held_by_lock(message_id, lock, claim_ids, now)
            if held is not None:
                return held, attempts, held.claim_id
            attempts, holder = qs.holder((attempts, lock.get('c')), now,
                                         cache)
            if holder in claim_ids:
                held = _held(message_id, attempts, cache[holder])
                if held is not None:
                    return held, attempts, holder
            if message is _UNREAD:
                message = qs.message(message_id, now)
                if message is None:
                    return None
            return message, attempts, holder or self._remover(
                qs, message_id, attempts, claim_ids, cache, now)

        return [t for t in self._store.parallel(target, list(zip(
            message_ids, firsts, probes, unread))) if t is not None]

    @staticmethod
    def _remover(qs, message_id, count, claim_ids, cache, now):
        """A named live claim whose record has it win a later attempt of
        ``message_id`` than the locks left show: that claim's delete was
        cut short after its lock went (a bulk delete fails object by
        object), and its retry finishes the removal. Attempts are won in
        order and a claim's id reaches its client only after its locks
        are won, so no other claim matches."""
        for claim_id in claim_ids:
            record = qs.claim_record(claim_id, cache)
            if record is not None and record['e'] > now and any(
                    member[0] == message_id and member[2] > count
                    for member in record['m']):
                return claim_id
        return None

    def _delete(self, queue, project, message_id, claim_id):
        now = self.driver.now_ms()
        qs = self._state(queue, project)
        targets = self._targets(queue, project, qs, [message_id], now,
                                [claim_id] if claim_id else [])
        if not targets:
            return
        message, count, holder = targets[0]
        if claim_id:
            if holder is None:
                raise storage_errors.MessageNotClaimed(message_id)
            if holder != claim_id:
                raise storage_errors.MessageNotClaimedBy(message_id,
                                                         claim_id)
        elif holder is not None:
            raise storage_errors.MessageIsClaimed(message_id)
        if claim_id and message.gk is not None:
            # Only a grouped message's delete can keep a sticky client
            # active: others send no request for it. Before the removal,
            # so that the group's next head is filed for this client.
            pins.touch(qs, sticky.current_client(), now)
        qs.remove([(message.id, message.pos, count, message.gk)], now,
                  held=[message.id] if holder else [])

    def _bulk_delete(self, queue, project, message_ids, claim_ids):
        if not message_ids:
            return
        now = self.driver.now_ms()
        qs = self._state(queue, project)
        targets = self._targets(queue, project, qs, message_ids, now,
                                claim_ids or [])
        if claim_ids:
            allowed = set(claim_ids)
            if any(holder and holder not in allowed
                   for _, _, holder in targets):
                raise storage_errors.ClaimDoesNotMatch(
                    ','.join(claim_ids), queue, project)
        if any(m.gk is not None for m, _, _ in targets):
            pins.touch(qs, sticky.current_client(), now)
        qs.remove([(m.id, m.pos, count, m.gk) for m, count, _ in targets],
                  now, held=[m.id for m, _, holder in targets if holder])

    def _pop(self, queue, project, limit, policy):
        return self.driver.claim_controller.take(
            queue, project, limit, policy, mode='pop')[1]

    # -- message groups (groups.py, group_admin.py) -------------------------

    def _groups(self, queue, project, marker, limit):
        return group_admin.list_groups(
            self._state(queue, project), self.driver.now_ms(), marker, limit,
            self.retention_of(queue, project))

    def _purge_group(self, queue, project, group):
        return group_admin.purge(self._state(queue, project),
                                 self.driver.now_ms(), group)

    def _unpin_group(self, queue, project, group):
        return pins.unpin(self._state(queue, project), names.group_key(group))

    def _move_group(self, queue, project, group, target):
        return group_admin.move(self.driver, queue, project, group, target)

    # -- queue-wide --------------------------------------------------------

    def _purge_queue(self, queue, project):
        """Delete the queue's objects a listing page at a time (what a
        deletion holds in memory), then its container; objects posted
        meanwhile (the container's deletion answers 409) are deleted in
        the next round."""
        qs = self._state(queue, project)
        for _ in range(PURGE_ROUNDS):
            # Paged by marker: a listing that lags may show what was just
            # deleted, and must not be deleted again and again.
            marker = None
            while True:
                page = self._store.listing(qs.c, '', marker=marker,
                                           limit=PURGE_PAGE)
                self._store.delete_many(qs.c, [e['name'] for e in page])
                if len(page) < PURGE_PAGE:
                    break
                marker = page[-1]['name']
            if self._store.delete_container(qs.c):
                return
        # Listings still show objects: posts racing the deletion, or
        # container updates Swift has not applied yet. gc removes what is
        # left as it expires (its positions listed, its m/ as strays).
        LOG.warning('Swift: queue %s of project %s deleted with its '
                    'container %s not yet empty', queue, project, qs.c)

    def _stats(self, queue, project, retention):
        now = self.driver.now_ms()
        qs = self._state(queue, project)
        pins.sweep(qs, now)
        qs.settle(now)
        (positions, live_hints, pinned, delayed_entries, members, ready,
         locks) = drafts.indexes(qs, [('p/',),
                                      ('x/', 'x/' + names.ms(now) + '0'),
                                      ('P/',)])
        # Drafts (a post cut short before filing) do not count.
        filed = drafts.filed_ids(delayed_entries, members, ready, locks)
        live, group_of = {}, {}
        for entry in positions:
            fields = names.position_fields(entry)
            if (fields is not None and fields['e'] > now
                    and fields['id'] in filed):
                live[fields['id']] = (fields['pos'], fields)
                group_of[fields['id']] = fields['g']
        live_claims = {names.parse_expiry(e['name'])[1] for e in live_hints}
        latest = {}
        for entry in locks:
            message_id, attempt = names.parse_lock(entry['name'])
            if attempt > latest.get(message_id, (0, None))[0]:
                latest[message_id] = (attempt, names.ct_params(
                    entry.get('content_type')).get('c'))
        claimed = {mid for mid, (_, holder) in latest.items()
                   if mid in live and holder in live_claims}
        # What retention keeps, from the listing already read.
        keep = swift_retention.horizon_of(
            qs, reversed(positions), retention, now, claimed)
        live = {mid: item for mid, item in live.items()
                if mid in claimed or keep.keeps(item[0], item[1]['cr'])}
        group_of = {mid: group_of[mid] for mid in live}
        delayed = {names.parse_entry(e['name'])[2] for e in delayed_entries
                   if names.parse_entry(e['name'])[0] > now}
        delayed = {mid for mid in delayed if mid in live} - claimed
        stats = {'total': len(live), 'claimed': len(claimed),
                 'delayed': len(delayed),
                 'free': len(live) - len(claimed) - len(delayed),
                 # Only heads are ever claimed: a group is in flight when
                 # one of its members is.
                 'groups': len(set(group_of.values()) - {None}),
                 'groups_in_flight': len(
                     {group_of[mid] for mid in claimed} - {None})}
        # Oldest and newest cover every live message, delayed ones too:
        # Zaqar's transport expects them whenever the total is not zero.
        ordered = sorted(live.values(), key=lambda item: item[0])
        if ordered:
            stats['oldest'] = _stat_entry(now, ordered[0][1])
            stats['newest'] = _stat_entry(now, ordered[-1][1])
        if pinned:
            stats['groups_pinned'] = len(pinned)
        stats['removed_by_retention'] = swift_retention.removed(qs)
        return stats

    # -- persistent consumers (consumers.py) --------------------------------

    def _consumer(self, queue, project, consume_id):
        return self._consumers_store.one(queue, project, consume_id)

    def _consumers(self, queue, project):
        return self._consumers_store.all(queue, project)

    def _live_readers(self, queue, project, idle=True, need=None):
        if idle:
            # Stats: every consumer, live and idle, is counted.
            return super()._live_readers(queue, project)
        live, lowest = self._readers.live_readers(queue, project,
                                                  self._idle_s, need or 1)
        return live, lowest, None

    def _consumer_register(self, queue, project, consume_id):
        self._consumers_store.register(queue, project, consume_id)

    def _consumer_forget(self, queue, project, consume_id):
        self._consumers_store.forget(queue, project, consume_id)

    def _consumer_update(self, queue, project, consume_id, ack, handed,
                         lost):
        self._consumers_store.update(queue, project, consume_id, ack, handed,
                                     lost)

    def _count_after(self, queue, project, position, retention):
        return swift_retention.count_after(
            self._state(queue, project), retention, self.driver.now_ms(),
            position)

    def _clean(self, queue, project, retention, batch):
        return swift_retention.clean(self._state(queue, project), retention,
                                     self.driver.now_ms(), batch)


def _worth_reading(fields, now, keep, include_delayed, echo, client_uuid):
    """False when a p/ entry alone shows that a listing leaves its message
    out: expired, not due, not kept, or posted by the listing client."""
    if fields['e'] <= now or not (include_delayed or fields['d'] <= now):
        return False
    if not (fields['id'] in keep.in_flight
            or keep.keeps(fields['pos'], fields['cr'])):
        return False
    return echo or fields.get('u') != client_uuid


def _stat_entry(now, fields):
    created = fields['cr']
    return {'id': fields['id'], 'age': max(0, (now - created) // 1000),
            'created': controller._iso(created)}


# A message _targets has not read yet.
_UNREAD = object()


class _Held:
    """What a delete needs of a message its claim's record describes."""

    __slots__ = ('id', 'pos', 'gk', 'claim_id')

    def __init__(self, message_id, pos, gk, claim_id=None):
        self.id, self.pos, self.gk = message_id, pos, gk
        self.claim_id = claim_id


def _first_locks(qs, message_id, first):
    """(listing, (attempt, its HEAD)) for latest_lock, from the HEAD of a
    message's first lock: with none, nothing more is asked (a retried
    delete whose removal went); else the second is asked for, and the
    locks are listed (None) once it exists."""
    if first is None:
        return [], (1, None)
    second = qs.store.head(qs.c, names.lock_obj(message_id, 2))
    if second is not None:
        return None, (2, second)
    return [{'name': names.lock_obj(message_id, 1),
             'content_type': first.get('content-type')}], (2, None)


def _held_by_lock(message_id, lock, claim_ids, after):
    """The message as its lock (the lock's fields) describes it, when
    that lock is a named claim's and says the claim lives past
    ``after`` (ms); else None. A lock's expiry is never later than its
    claim's (names.py, ``l/``)."""
    if lock.get('c') not in claim_ids:
        return None
    try:
        expires, pos = int(lock['e']), int(lock['p'])
    except (KeyError, ValueError):
        return None
    if expires <= after:
        return None
    return _Held(message_id, pos, lock.get('g'), lock['c'])


def _held(message_id, attempt, record):
    """The message as ``record`` (a live claim's) lists it at ``attempt``,
    or None. Members are [id, position, attempt, group key, poster];
    records written before group keys were kept lack the key."""
    for member in record['m']:
        if member[0] == message_id and member[2] == attempt \
                and len(member) > 3:
            return _Held(message_id, member[1], member[3])
    return None
