"""Claims on Swift (layout: names.py).

A claim lists the queue's ``a/`` index (due, unclaimed messages in position
order; delayed ones are in ``d/``, keyed by due time, and are never read by
a claim unless due) and takes each message by creating ``l/<id>/<attempt>``
with ``If-None-Match: *``. Swift answers 412 to every creator but the first,
so two claimers can never both win one attempt of a message. The claim
record is written *before* the locks, so a claimer that dies after winning
locks leaves a record whose expiry redelivers them.

Grouped entries (``g=`` in their Content-Type) are taken at most one per
group per claim or pop, and only while their message is the first entry
of its group (groups.py); a head that leaves during the claim (expired,
dead-lettered, gone) files the next member, and the claim lists again.

On a sticky queue a claim also lists its own client's pinned heads
(``A/<ck>/``), merged with ``a/`` by position, and pins the groups it
takes (pins.py).
"""

import functools
import json
import uuid

from oslo_log import log as logging

from zaqar_delay import controller
from zaqar_delay import errors
from zaqar_delay import rules
from zaqar_delay import sticky
from zaqar_delay.drivers.swift import groups
from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import pins
from zaqar_delay.drivers.swift import pops
from zaqar_delay.drivers.swift import retention as swift_retention

LOG = logging.getLogger(__name__)

# Extra entries listed per round: some may be stale or lost to a rival.
OVERFETCH = 2
# Dropped group members a claim on a grouped queue that found nothing
# removes before it looks again (found in at most SWEEP_PAGES listing
# pages of SWEEP_PAGE): where they block group heads, a consumer would
# otherwise read its empty answers as an empty queue.
EMPTY_SWEEP = 100
SWEEP_PAGE = 1000
SWEEP_PAGES = 10
# A claim whose locks are not all won this long before its expiry gives its
# messages back (a quarter of the claim ttl when that is shorter): another
# node settling the expiry must see every lock it holds.
SAFETY_MS = 2000


class ClaimController(controller.ClaimController):

    def __init__(self, driver):
        super().__init__(driver)
        self._store = driver.store

    def _claim(self, queue, project, ttl, grace, limit, policy):
        return self.take(queue, project, limit, policy, 'claim', ttl, grace)

    def take(self, queue, project, limit, policy, mode, ttl=0, grace=0):
        """Claim (or pop) up to ``limit`` due messages in position order;
        dead-letter those whose attempts ran out."""
        now = self.driver.now_ms()
        qs = self.driver.queue_state(queue, project)
        pins.before_claim(qs, policy, now)
        prefixes, ordered = pins.claim_prefixes(policy)
        # Messages retention dropped sort before the cut: never listed.
        # A cut that needs no read is known before settling, and then,
        # unless dropped group members are swept first, the first page
        # is listed in settling's round, used if settling moved nothing.
        keep = (swift_retention.horizon(qs, policy.retention, now)
                if swift_retention.reads_nothing(policy.retention) else None)
        early = keep is not None and not (policy.group_key and keep.cut)
        starts = None if keep is None else self._starts(keep, prefixes)
        moved, pages = qs.settle(now, [functools.partial(
            self._store.listing, qs.c, prefix, marker=starts[prefix],
            limit=limit * OVERFETCH) for prefix in prefixes] if early else [])
        listed = dict(zip(prefixes, pages)) if early and not moved else None
        if keep is None:
            keep = swift_retention.horizon(qs, policy.retention, now)
            starts = self._starts(keep, prefixes)
        if policy.group_key:
            swift_retention.sweep_groups(qs, keep, now, limit)
        claim_id = str(uuid.uuid4())
        record = {'t': ttl, 'g': grace, 'e': now + ttl * 1000,
                  'rd': policy.redelivery_delay, 'm': []}
        keep_until = record['e'] + grace * 1000
        won, seen, taken = [], set(), set()
        markers, exhausted = dict(starts), set()
        swept = not (policy.group_key and keep.cut)
        while len(won) < limit:
            if len(exhausted) == len(prefixes):
                if swept or won or not self._sweep_empty(qs, keep, now):
                    break
                swept, markers, exhausted = True, dict(starts), set()
            page = self._page(qs, markers, exhausted,
                              (limit - len(won)) * OVERFETCH, ordered,
                              listed)
            listed = None
            fresh, expiring = [], []
            for e in page:
                pos = names.parse_entry(e['name'])[0]
                if e['name'] not in seen and pos >= (keep.cut or 0):
                    seen.add(e['name'])
                    params = names.ct_params(e.get('content_type'))
                    (expiring if params.get('x') else fresh).append(
                        names.parse_entry(e['name']) + (
                            params.get('g'), params.get('u'), e['name']))
            advanced = qs.advanced
            self._drop_expired(qs, expiring, now)
            while fresh and len(won) < limit:
                chunk, fresh = self._chunk(fresh, limit - len(won), taken)
                self._round(qs, policy, project, now, mode, claim_id,
                            record, chunk, won, taken, keep)
            if qs.advanced != advanced and len(won) < limit:
                # A head left: its group's next member may sort before the
                # marker. List again from the start (seen entries skipped).
                markers, exhausted = dict(starts), set()
        pins.after_claim(qs, policy, [entry[3] for entry, _ in won], now)
        if mode == 'pop':
            return claim_id, pops.finish(qs, claim_id, won, now)
        if record['m'] and (not won or self._overran(record)):
            # Nothing won, or the claim took so long that another node may
            # already have settled its expiry without seeing our locks:
            # hand the messages back ourselves (idempotent with that node).
            if won:
                qs.redeliver(claim_id, record, record['e'],
                             self.driver.now_ms())
                won = []
            self._store.delete_many(qs.c, [
                names.claim_obj(claim_id),
                names.expiry_obj(record['e'], claim_id)])
        elif len(record['m']) > len(won):
            # The record named every message a lock was proposed for; a
            # renewal extends what it names, and retention's cut keeps
            # what the hint names, so both keep only those won (two PUTs
            # more, when a rival or a group took some).
            held = {entry[1] for entry, _ in won}
            record['m'] = [m for m in record['m'] if m[0] in held]
            self._record_and_hint(qs, claim_id, record)
        return claim_id, self._finish(qs, now, claim_id, won, keep_until)

    def _tidy(self, qs, stale):
        """Delete entries that only cost readers a request (the filings of
        attempts locked, a lock of a message gone): a claim that won its
        messages hands them out even if Swift fails to delete these, and
        the next claim that meets one drops it."""
        try:
            self._store.delete_many(qs.c, stale)
        except errors.BackendUnavailable as exc:
            LOG.warning('Swift: %d stale entries of %s left for the next '
                        'claim (%s)', len(stale), qs.c, exc)

    def _drop_expired(self, qs, entries, now):
        """Filings of group heads filed for their expiry (state.
        QueueState.make_available): never handed out. One whose message
        expired goes with it, and its group moves on; one still live
        here (the node that filed it has a clock ahead) waits for a
        later claim. Cleanup only: a Swift error here leaves it to the
        next claim, it does not fail this one."""
        def drop(entry):
            pos, message_id, _, gk = entry[:4]
            try:
                message, missing = qs.lookup(message_id, now)
                if missing:
                    # Its removal died midway: finish it, advance the group.
                    qs.finish_removal([(message_id, pos, None, gk)], now)
            except errors.BackendUnavailable as exc:
                LOG.warning('Swift: a head filed for its expiry in %s left '
                            'for the next claim (%s)', qs.c, exc)
                return None
            return entry[5] if message is None else None

        # The removal deleted each a/ filing, and the A/ filing of a head
        # whose pin it found; a pinned filing whose pin is gone is left,
        # and those go in one request.
        left = [name for name in self._store.parallel(drop, entries)
                if name is not None and not name.startswith('a/')]
        if left:
            self._tidy(qs, left)

    @staticmethod
    def _sweep_empty(qs, keep, now):
        """A claim that found nothing on a grouped queue: remove dropped
        group members that may block heads (retention.sweep_groups);
        True if any went. The claim holds nothing
        then and its empty answer stands, so a Swift error here ends the
        sweep, not the claim."""
        try:
            return swift_retention.sweep_groups(
                qs, keep, now, EMPTY_SWEEP, SWEEP_PAGE, SWEEP_PAGES)
        except errors.BackendUnavailable:
            LOG.warning('Swift: an empty claim could not remove what '
                        'retention dropped; the cleanup will', exc_info=True)
            return False

    @staticmethod
    def _starts(keep, prefixes):
        """Where a claim starts listing each index: past retention's cut
        (the pinned heads of every client, A/, are listed whole)."""
        return {prefix: keep.cut and prefix != 'A/' and prefix
                + names.pos(keep.cut) or None for prefix in prefixes}

    def _page(self, qs, markers, exhausted, wanted, ordered, listed=None):
        """The next entries of the indexes a claim reads (pins.
        claim_prefixes), merged by position: where two are listed, only
        up to the lower of their last positions when both pages are
        full, so an entry listed later never sorts before one taken.
        ``listed``: those pages, read already."""
        live = [prefix for prefix in markers if prefix not in exhausted]
        pages = listed or dict(zip(live, self._store.parallel(
            lambda prefix: self._store.listing(
                qs.c, prefix, marker=markers[prefix], limit=wanted), live)))
        bound = None
        for page in pages.values():
            if ordered and len(live) > 1 and len(page) == wanted:
                last = names.parse_entry(page[-1]['name'])[0]
                bound = last if bound is None else min(bound, last)
        out = []
        for prefix, page in pages.items():
            kept = [e for e in page if bound is None
                    or names.parse_entry(e['name'])[0] <= bound]
            if kept:
                markers[prefix] = kept[-1]['name']
            # A short page cut at the bound still holds entries to take.
            if len(page) < wanted and len(kept) == len(page):
                exhausted.add(prefix)
            out += kept
        return sorted(out, key=lambda e: names.parse_entry(e['name'])[0])

    @staticmethod
    def _chunk(fresh, size, taken):
        """Up to ``size`` entries to attempt, at most one per group; the
        rest of ``fresh`` stays for the next chunk, except entries of
        groups this claim won already. Those of a group attempted in
        this chunk stay too: the attempt may fail (a stale filing of a
        member gone, listed before the head), and then the next one is
        tried (``_round`` takes the group out of ``taken``)."""
        chunk, rest, attempted = [], [], set()
        for entry in fresh:
            gk = entry[3]
            if len(chunk) == size or gk in attempted:
                rest.append(entry)
            elif gk is None or gk not in taken:
                if gk is not None:
                    taken.add(gk)
                    attempted.add(gk)
                chunk.append(entry)
        return chunk, rest

    def _round(self, qs, policy, project, now, mode, claim_id, record,
               chunk, won, taken, keep):
        """Attempt ``chunk`` in parallel; dead-letter at once the
        messages whose attempts ran out, so their groups move on. One
        that ``keep`` no longer keeps is removed instead (_attempts)."""
        kinds = [self._kind(policy, entry[2], mode, claim_id)
                 for entry in chunk]
        if mode == 'claim':
            # Its poster too: the entry its end files names it.
            self._record(qs, claim_id, record, [
                [entry[1], entry[0], entry[2], entry[3], entry[4]]
                for entry, kind in zip(chunk, kinds) if kind == claim_id])
        results = self._attempts(qs, now, chunk, kinds, claim_id, keep,
                                 record['e'])
        dead = []
        for entry, kind, message in zip(chunk, kinds, results):
            if message is None or kind == names.DEAD:
                # This group may still yield a message in this claim.
                taken.discard(entry[3])
            if message is None:
                continue
            (dead if kind == names.DEAD else won).append((entry, message))
        if dead:
            self.dead_letter(qs, policy, project, [m for _, m in dead], now)

    def _overran(self, record):
        """True once a claim's locks may postdate its own expiry, as seen
        by another node whose clock is up to SAFETY_MS ahead."""
        safety = min(SAFETY_MS, record['t'] * 250)
        return self.driver.now_ms() >= record['e'] - safety

    @staticmethod
    def _kind(policy, attempt, mode, claim_id):
        if policy.max_claim_count and attempt - 1 >= policy.max_claim_count:
            return names.DEAD
        return claim_id if mode == 'claim' else names.POP

    def _record(self, qs, claim_id, record, members):
        """Write the claim record and its expiry hint naming every message
        about to be locked (both again on a later round: the hint names
        the members too, names.hint_type)."""
        if not members:
            return
        record['m'] += members
        self._record_and_hint(qs, claim_id, record)

    def _record_and_hint(self, qs, claim_id, record):
        self._store.parallel(lambda write: write(), [
            lambda: qs.write_claim(claim_id, record),
            lambda: self._put_hint(qs, claim_id, record)])

    def _put_hint(self, qs, claim_id, record):
        self._store.put(qs.c, names.expiry_obj(record['e'], claim_id),
                        content_type=names.hint_type(record))

    def _attempts(self, qs, now, chunk, kinds, op, keep, expiry):
        """Win attempt ``entry`` of each message of ``chunk``: its
        message, or None. Every lock is proposed before any is read back,
        so the chunk waits ``create_settle_time`` once, and the messages
        are read during that wait. A pop's lock names the pop (``op``),
        whose outcome decides; a claim's carries the claim's ``expiry``.
        A message won that ``keep`` no longer keeps is removed, not
        handed out (_past_time)."""
        tokens = self._store.parallel(
            lambda item: self._propose(qs, now, *item, op=op,
                                       expiry=expiry),
            list(zip(chunk, kinds)))
        proposed = [(entry, token[0], kind == op) for entry, kind, token
                    in zip(chunk, kinds, tokens) if token]
        looked_up = []

        def meanwhile():
            # Neither waits for the read-back: a filed message's record
            # never changes, and once a lock of this attempt exists,
            # ours or a rival's, its filing is stale whoever won (the
            # next attempt is filed only when that claim ends). A pop's
            # or dead letter's filing goes with its removal instead.
            reads = [functools.partial(qs.lookup, entry[1], now)
                     for entry, _, _ in proposed]
            stale = [entry[5] for entry, _, claimed in proposed if claimed]
            found = self._store.parallel(lambda read: read(), reads + (
                [functools.partial(self._tidy, qs, stale)] if stale
                else []))
            looked_up.extend(found[:len(reads)])

        if proposed:
            # After a 412 too: it may answer a resent PUT whose first
            # send won (connection.Store.create).
            self._store.settle_wait(meanwhile)
        else:
            meanwhile()
        won = self._store.parallel(
            lambda item: self._store.confirm(
                qs.c, names.lock_obj(item[0][1], item[0][2]), item[1]),
            proposed)
        checks = [(entry, ours, message, tidied)
                  for (entry, _, tidied), ours, message
                  in zip(proposed, won, looked_up)]
        kept = self._store.parallel(
            lambda check: self._confirmed(qs, now, *check), checks)
        # A message carried in from another store keeps its age at a new
        # position, which the cut (positions) passes only ``time`` after
        # it came. Judged here, on the record read during the settle
        # wait, its ``cr`` costs a kept message no request; carried in
        # the filings instead, every filer (settling, redelivery, a
        # group's advance) would have to know it.
        old = [check[0] for check, message in zip(checks, kept)
               if message is not None
               and not keep.keeps(message.pos, message.created)]
        if old:
            self._past_time(qs, now, old)
        gone = {entry[5] for entry in old}
        outcome = {check[0][5]: message
                   for check, message in zip(checks, kept)
                   if check[0][5] not in gone}
        return [outcome.get(entry[5]) for entry in chunk]

    @staticmethod
    def _past_time(qs, now, entries):
        """Remove the messages of ``entries``, whose attempts this claim
        or pop won, as retention's cleanup would (counted): left to a
        later claim, each would cost it a lock again. A Swift error
        leaves them held by this operation's locks, which gc and the
        cleanup deal with once it is over; never handed out."""
        try:
            swift_retention.take_over(qs, [
                ({'id': entry[1], 'pos': entry[0], 'g': entry[3]},
                 entry[2]) for entry in entries], now)
        except errors.BackendUnavailable:
            LOG.warning('Swift: messages of %s past retention\'s time are '
                        'left to the cleanup', qs.c, exc_info=True)

    def _propose(self, qs, now, entry, kind, op, expiry):
        """(owner token, True if written) of this entry's lock, or None
        when the entry is not its group's head."""
        pos, message_id, attempt, gk = entry[:4]
        if gk is not None and not groups.is_head(qs, gk, pos, message_id):
            if qs.store.head(qs.c, names.group_obj(gk, pos, message_id)) \
                    is None:
                # Filed but out of its group: a removal cut short after
                # its g/ entry went (it goes first). Left, it would stand
                # for its group in every claim and block the real head;
                # finish the removal, which files the head. Its own entry
                # goes too: one filed after the removal took the locks
                # (a claim's expiry racing a pop) has a later attempt
                # than the locks left tell.
                qs.finish_removal([(message_id, pos, None, gk)], now)
                qs.store.delete(qs.c, entry[5])
            # Else not first in its group (two posts crossed): it stays
            # filed and is taken once it is the head.
            return None
        token = uuid.uuid4().hex
        if kind == op and kind != names.POP:
            lock_type = names.claim_lock_type(kind, expiry, pos, gk)
        else:
            lock_type = names.content_type(
                c=kind, o=op if kind == names.POP else None)
        return token, self._store.propose(
            qs.c, names.lock_obj(message_id, attempt), token,
            content_type=lock_type)

    def _confirmed(self, qs, now, entry, won, looked_up, tidied):
        """The message of ``entry`` if its lock is ours (``won``) and the
        message (``looked_up``: ``qs.lookup``) is live at its position;
        else None, its stale entries dropped (its filing unless
        ``tidied`` already)."""
        pos, message_id, attempt, gk = entry[:4]
        lock = names.lock_obj(message_id, attempt)
        filing = [] if tidied else [entry[5]]
        if not won:
            # A rival won this attempt: its filing is stale.
            self._tidy(qs, filing)
            return None
        message, missing = looked_up
        if message is None or message.pos != pos:
            self._tidy(qs, [lock] + filing)
            if missing and gk is not None:
                # Its removal died midway: finish it, advance the group.
                qs.finish_removal([(message_id, pos, attempt, gk)], now)
            return None
        return message

    def _finish(self, qs, now, claim_id, won, keep_until):
        lifetime = (keep_until - now) // 1000
        self._store.parallel(lambda m: qs.extend(m, keep_until, lifetime),
                             [m for _, m in won])
        return [m.render(now, claim_id, entry[2]) for entry, m in won]

    def dead_letter(self, qs, policy, project, messages, now):
        """Copy messages into the dead-letter queue (keeping their ids, so a
        repeated copy is skipped), then delete them here. They arrive in
        position order: one insert per run of one poster's messages."""
        dlq = policy.dead_letter_queue
        if dlq is not None:
            messages_ctrl = self.driver.message_controller
            dlq_policy = messages_ctrl.target_policy(dlq, project)
            runs = []
            for message in sorted(messages, key=lambda m: m.pos):
                body_json = json.dumps(message.body, ensure_ascii=False,
                                       separators=(',', ':'))
                moved = rules.NewMessage(
                    id=message.id,
                    ttl=policy.dead_letter_ttl or message.ttl, delay=0,
                    body=message.body, body_json=body_json,
                    group=rules.group_or_none(message.body, dlq_policy))
                if runs and runs[-1][0] == message.client:
                    runs[-1][1].append(moved)
                else:
                    runs.append((message.client, [moved]))
            for client_uuid, moved in runs:
                messages_ctrl._insert(dlq, project, moved, client_uuid,
                                      copies=True)
        if dlq is not None:
            # Before the removal: dying in between must not leave a
            # marker that would skip these messages were they moved back.
            qs.moved_out([m.id for m in messages])
        qs.remove([(m.id, m.pos, None, m.gk) for m in messages], now)

    # -- one claim ---------------------------------------------------------

    def _live(self, qs, claim_id, now):
        record = qs.claim_record(claim_id)
        if record is None or record['e'] <= now:
            return None
        return record

    def _get_claim(self, queue, project, claim_id):
        now = self.driver.now_ms()
        qs = self.driver.queue_state(queue, project)
        record = self._live(qs, claim_id, now)
        if record is None:
            return None

        def member(item):
            message_id, attempt = item[0], item[2]
            if qs.latest_lock(message_id) != (attempt, claim_id):
                return None
            message = qs.message(message_id, now)
            return message and message.render(now, claim_id, attempt)

        messages = [m for m in self._store.parallel(member, record['m'])
                    if m]
        created = record['e'] - record['t'] * 1000
        meta = {'id': claim_id, 'ttl': record['t'],
                'age': max(0, (now - created) // 1000)}
        return meta, messages

    def _renew(self, queue, project, claim_id, ttl, grace):
        now = self.driver.now_ms()
        qs = self.driver.queue_state(queue, project)
        record = self._live(qs, claim_id, now)
        if record is None:
            return False
        if any(len(member) > 3 and member[3] for member in record['m']):
            # Only a grouped claim can keep a sticky client active.
            pins.touch(qs, sticky.current_client(), now)
        old_expiry = record['e']
        record.update(t=ttl, g=grace, e=now + ttl * 1000)
        keep_until = record['e'] + grace * 1000
        # A renewal lowers the locks' expiry, never raises it: one that
        # lands after the claim ended (its expiry settled, or released,
        # while the renewal was in flight) writes the record again, and
        # locks saying it lives would let its claimer delete a message
        # another consumer now holds. Deletes after the first expiry of
        # an extended claim ask the record (and the next lock).
        shorter = record['e'] < old_expiry
        if shorter:
            # Before the record: a failed renewal leaves them lower.
            self._relabel_locks(qs, claim_id, record['m'], record['e'])
        self._put_hint(qs, claim_id, record)
        qs.write_claim(claim_id, record)
        if old_expiry != record['e']:
            self._store.delete(qs.c, names.expiry_obj(old_expiry, claim_id))

        def extend(item):
            if shorter:
                # After the record too: a crossing renewal may have
                # raised them in between (_unless_rewritten).
                self._relabel_locks(qs, claim_id, [item], record['e'])
            message = qs.message(item[0], now)
            if message is not None:
                qs.extend(message, keep_until, ttl + grace)

        self._store.parallel(extend, record['m'])
        return self._unless_rewritten(qs, claim_id, record) if shorter \
            else True

    def _unless_rewritten(self, qs, claim_id, record):
        """Two shortening renewals of one claim (a client's retry of one
        whose reply was lost) can cross: one writes the record after the
        other, whose locks then say more than it. Each writes its locks
        after its record too and reads the record back: one rewritten
        since takes the expiry off the locks, so deletes ask the record.
        The last lock written with an expiry is followed by its writer's
        read-back, so no lock is left saying more than the record.

        A release crossing the renewal (it ran after the renewal read the
        claim alive) leaves its marker first: found, the renewal takes
        the expiry off the locks and removes the record it wrote again,
        and the claim is gone (False). A release that writes its marker
        after this read-back takes the expiry off the locks after this
        renewal wrote them."""
        found, released = self._store.parallel(lambda read: read(), [
            lambda: qs.claim_record(claim_id),
            lambda: qs.store.head(qs.c, names.released_obj(claim_id))])
        if released is not None:
            self._relabel_locks(qs, claim_id, record['m'], None)
            self._store.delete_many(qs.c, [
                names.claim_obj(claim_id),
                names.expiry_obj(record['e'], claim_id)])
            return False
        if found is None or found['e'] != record['e']:
            self._relabel_locks(qs, claim_id, record['m'], None)
        return True

    def _relabel_locks(self, qs, claim_id, members, expiry):
        """Write the claim's ``expiry`` (None: none, so readers go to the
        record) into the locks of ``members`` (a record's: the messages
        it won), which a claimer's delete goes by (names.py, ``l/``). A
        POST never creates: a lock gone with its message stays gone.
        Members of records written before group keys were kept get no
        expiry: their deletes read the record."""
        def relabel(member):
            known = len(member) > 3
            qs.store.post(qs.c, names.lock_obj(member[0], member[2]), {
                'Content-Type': names.claim_lock_type(
                    claim_id, expiry if known else None, member[1],
                    member[3] if known else None)})

        self._store.parallel(relabel, members)

    def _release(self, queue, project, claim_id):
        now = self.driver.now_ms()
        qs = self.driver.queue_state(queue, project)
        record = self._live(qs, claim_id, now)
        if record is None:
            return
        # First, for a shortening renewal in flight (_unless_rewritten);
        # kept until the claim would have ended, and the expiry margin.
        self._store.put(qs.c, names.released_obj(claim_id),
                        headers=qs.delete_at(max(record['e'], now)))
        # Before the record goes: the locks must not outlive it as live.
        self._relabel_locks(qs, claim_id, record['m'], None)
        qs.redeliver(claim_id, record, now, now)
        self._store.delete_many(qs.c, [
            names.claim_obj(claim_id),
            names.expiry_obj(record['e'], claim_id)])
