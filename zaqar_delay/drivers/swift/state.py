"""Reading and settling one queue's state on Swift (layout: names.py).

Swift has no transactions, so every step here is either a conditional
create (If-None-Match: the only way two nodes ever decide anything) or
idempotent: index entries have deterministic names, so two nodes settling
the same claim write the same objects and delete the same ones. A reader
that finds an index entry whose message is gone removes the entry.
Removing a grouped message advances its group (groups.py).
"""

import functools
import json
import logging

from zaqar_delay import controller
from zaqar_delay import errors
from zaqar_delay.drivers.swift import consumers as swift_consumers
from zaqar_delay.drivers.swift import groups
from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import pins

LOG = logging.getLogger(__name__)

# Index entries settled per operation, so one call never runs unbounded.
SETTLE_BATCH = 1000
META_E = 'X-Object-Meta-E'
# A claim's ttl + grace, when it outgrew the message's own ttl.
META_T = 'X-Object-Meta-T'


class Message:
    """One stored message (``m/<id>``) as read at ``now``."""

    __slots__ = ('id', 'body', 'ttl', 'created', 'expires', 'due', 'client',
                 'pos', 'group', 'checksum')

    def __init__(self, message_id, headers, record):
        self.id = message_id
        self.body = record['b']
        self.ttl = int(headers.get(META_T.lower(), record['t']))
        self.created = record['cr']
        self.expires = int(headers.get(META_E.lower(), record['e']))
        self.due = record['d']
        self.client = record['u']
        self.pos = record['p']
        self.group = record.get('g')
        self.checksum = record.get('cs')

    @property
    def gk(self):
        """The group key (names.group_key) or None."""
        return None if self.group is None else names.group_key(self.group)

    def render(self, now, claim_id=None, claim_count=0,
               include_created=False):
        return controller.basic_message(
            self.id, self.body, self.ttl, self.created, now, self.pos,
            claim_id=claim_id, claim_count=claim_count,
            include_created=include_created, checksum=self.checksum,
            delayed=self.due > now)


class QueueState:
    """The Swift objects of one queue: reads, settling, removal."""

    def __init__(self, store, container, expiry_margin, meta=None):
        self.store = store
        self.c = container
        self.margin = expiry_margin
        # Container metadata (real project and queue names, for gc).
        self.meta = meta
        # Grows whenever a removal advanced a group: a claim then lists
        # a/ again, since the next member may sort before its marker.
        self.advanced = 0
        # Whether the queue is sticky (pins.py): None when the operation
        # did not read its policy, and then grouped filings read the pin;
        # False files every head free (a queue that is not sticky, or
        # copies arriving: dead letters and moved groups come free).
        self.sticky = None
        # Pins and client activity read by this operation (pins.py).
        self.pins = {}
        self.activity = {}
        self._has_consumers = None

    def has_consumers(self):
        """True if the queue has persistent consumers (read once per
        operation: a removal marks its messages gone for them)."""
        if self._has_consumers is None:
            self._has_consumers = swift_consumers.any_consumer(self)
        return self._has_consumers

    # -- messages ----------------------------------------------------------

    def message(self, message_id, now):
        """The live message, or None (expired ones are removed)."""
        return self.lookup(message_id, now)[0]

    def lookup(self, message_id, now):
        """(live message or None, True if it was missing, not expired)."""
        found = self.store.get_json(self.c, names.message_obj(message_id))
        if found is None:
            return None, True
        message = Message(message_id, *found)
        if message.expires <= now:
            self.finish_removal([(message.id, message.pos, None, message.gk)],
                                now)
            return None, False
        return message, False

    def names_it(self, message_id, pos):
        """True if ``p/<pos>`` names the message: not so when it is gone,
        or when a rival's PUT landed after the post's read-back and the
        position names the rival's message (docs/swift.md, *Claim
        exclusivity*), which a removal of this one must not take."""
        position = self.store.head(self.c, names.position_obj(pos))
        return position is not None and names.ct_params(
            position.get('content-type')).get('id') == message_id

    def finish_removal(self, victims, now):
        """remove() of messages a reader found expired, or missing (a
        removal that died midway), rather than by their position's own
        listing entry or by their claimer's delete: one HEAD each, and a
        position that names another message stays (names_it)."""
        victims = list(victims)
        named = self.store.parallel(lambda v: self.names_it(v[0], v[1]),
                                    victims)
        for positions in (True, False):
            chosen = [v for v, ok in zip(victims, named) if ok == positions]
            if chosen:
                self.remove(chosen, now, positions=positions)

    def delete_at(self, expires_ms):
        return {'X-Delete-At': str(expires_ms // 1000 + 1 + self.margin)}

    def extend(self, message, keep_until, lifetime):
        """Keep a claimed message alive until ``keep_until`` (ms), its
        visible ttl grown to the claim's ``lifetime`` (ttl + grace, s) when
        that is longer, as Zaqar's drivers do. POST never creates, so a
        message deleted meanwhile stays deleted."""
        if message.expires >= keep_until:
            return
        # A POST replaces every metadata item: the ttl a claim grew
        # earlier is sent again, or a renewal would set it back. No
        # X-Delete-At, as the post wrote none (names.py, ``m/``); one a
        # message written before 2026-12-07 had goes with it.
        headers = {META_E: keep_until, META_T: max(message.ttl, lifetime)}
        if self.store.post(self.c, names.message_obj(message.id), headers):
            self.store.post(self.c, names.position_obj(message.pos), {
                'Content-Type': position_type(message, keep_until)})
        message.expires = keep_until
        message.ttl = max(message.ttl, lifetime)

    def remove(self, victims, now, held=(), positions=True):
        """Delete messages: ``victims`` are (id, position, attempts, group
        key) with attempts None when the locks must be listed first. Each
        group that lost a member is advanced afterwards; the objects go in
        victims' order, in bulk deletes of connection.BULK_LIMIT.

        ``positions`` False keeps their ``p/`` (and marks nothing gone
        for persistent consumers): the removal of a message whose
        position names another, or is gone (finish_removal, strays.py).

        ``held``: ids whose latest attempt a live claim holds. That claim
        deleted the filing it won, and the next attempt is filed only when
        it ends, so their filings are not sent: a Swift DELETE of an
        absent object still writes a tombstone and a container update. A
        filing left anyway (a claimer that died before deleting it, an
        expiry settled early by a node whose clock runs ahead) names a
        missing message, and the claim that lists it drops it."""
        held = set(held)
        victims = list(victims)
        missing = [v[0] for v in victims if v[2] is None]
        found = dict(zip(missing, self.store.parallel(
            lambda mid: self.latest_lock(mid)[0], missing)))
        pinned = self._pinned_to([v[3] for v in victims])
        doomed = []
        for message_id, pos, attempts, gk in victims:
            if attempts is None:
                attempts = found[message_id]
            if gk is not None:
                doomed.append(names.group_obj(gk, pos, message_id))
            if positions:
                doomed.append(names.position_obj(pos))
            doomed.append(names.message_obj(message_id))
            doomed += [names.lock_obj(message_id, k)
                       for k in range(1, attempts + 1)]
            if message_id in held:
                continue
            doomed += [names.avail_obj(pos, message_id, k)
                       for k in range(1, attempts + 2)]
            if pinned.get(gk):
                doomed += [names.pinned_obj(pinned[gk], pos, message_id, k)
                           for k in range(1, attempts + 2)]
        # Before they go: their consumers count them as lost (consumers.py).
        if positions:
            swift_consumers.mark_gone(self, [v[1] for v in victims])
        self.store.delete_many(self.c, doomed)
        touched = list(dict.fromkeys(v[3] for v in victims if v[3]))
        if touched:
            self.advanced += 1
            self.store.parallel(lambda gk: groups.advance(self, gk, now),
                                touched)

    def _pinned_to(self, gks):
        """{group key: the client key its pin names} (an A/ entry of a
        removed head goes with it; one filed for an earlier pin is
        dropped by that client's next claim)."""
        gks = list(dict.fromkeys(gk for gk in gks if gk))
        if self.sticky is False or not gks:
            return {}
        found = self.store.parallel(lambda gk: pins.pin_of(self, gk), gks)
        return {gk: pin['cl'] for gk, pin in zip(gks, found) if pin}

    def moved_out(self, message_ids):
        """Forget that these messages arrived here as copies: they left by
        a move, not by a consumer's delete, and may come back the same way
        (a dead letter moved back, then dead-lettered again)."""
        self.store.delete_many(self.c, [names.received_obj(mid)
                                        for mid in message_ids])

    # -- claims ------------------------------------------------------------

    def latest_lock(self, message_id, listed=None, probed=None):
        """(attempts won so far, claim id or pop/dead of the last one).

        The listing can lag behind a lock: an object server whose
        container update the container server did not take in time keeps
        it for Swift's object-updater, and the lock exists unlisted until
        that runs. Taken for "no lock", it would let a claim's expiry skip
        the message (never redelivered) and its group re-file attempt 1
        forever. So the attempt after the newest listed one is asked for
        by name: attempts are won in order, the first missing one ends.

        ``listed`` (the lock listing) and ``probed`` ((attempt, its HEAD))
        are what a caller read already, in one round with its other reads:
        when the probed attempt is the one to ask for, the lookup costs no
        round trip of its own.
        """
        attempts, fields = self.latest_lock_fields(message_id, listed,
                                                   probed)
        return attempts, fields.get('c')

    def latest_lock_fields(self, message_id, listed=None, probed=None):
        """``latest_lock`` with every field of that lock's Content-Type
        (a claim's lock carries its expiry, the message's position and
        group key: names.py, ``l/``); {} when no attempt was won."""
        if listed is None:
            listed = self.store.listing(self.c, names.lock_prefix(message_id))
        best = (0, {})
        for entry in listed:
            attempt = names.parse_lock(entry['name'])[1]
            if attempt > best[0]:
                best = (attempt, names.ct_params(entry.get('content_type')))
        while True:
            if probed is not None and probed[0] == best[0] + 1:
                found = probed[1]
            else:
                found = self.store.head(self.c, names.lock_obj(
                    message_id, best[0] + 1))
            if found is None:
                return best
            best = (best[0] + 1, names.ct_params(found.get('content-type')))

    def claim_record(self, claim_id, cache=None):
        if cache is not None and claim_id in cache:
            return cache[claim_id]
        found = self.store.get_json(self.c, names.claim_obj(claim_id))
        record = None if found is None else found[1]
        if cache is not None:
            cache[claim_id] = record
        return record

    def claim_of(self, message_id, now, cache=None):
        """(claim count, live claim id or None) of a message."""
        return self.holder(self.latest_lock(message_id), now, cache)

    def message_with_claim(self, message_id, now, cache=None):
        """(live message, claim count, live claim id or None), or None:
        the message and its locks are read at the same time."""
        message, lock = self.store.parallel(lambda read: read(), [
            lambda: self.message(message_id, now),
            lambda: self.latest_lock(message_id)])
        if message is None:
            return None
        return (message,) + self.holder(lock, now, cache)

    def holder(self, lock, now, cache=None):
        """(claim count, live claim id or None) from ``latest_lock``."""
        attempts, holder = lock
        if holder is None or holder in names.TAKEN:
            return attempts, None
        record = self.claim_record(holder, cache)
        live = record is not None and record['e'] > now
        return attempts, holder if live else None

    def busy(self, message_id, now, cache=None):
        """(attempts won so far, True while one is held: a live claim, a
        pop, a dead-letter move or a group move)."""
        attempts, holder = self.latest_lock(message_id)
        if holder is None:
            return attempts, False
        if holder in names.TAKEN:
            return attempts, True
        record = self.claim_record(holder, cache)
        return attempts, record is not None and record['e'] > now

    def make_available(self, pos, message_id, attempt, due, now, gk=None,
                       client=None, expires=None):
        """File attempt ``attempt`` under ``a/`` (due) or ``d/``; a
        grouped message's entry names its group key, and an entry names
        its poster when the filer knows it (``client``), so a listing
        without echo skips that poster's messages unread (scan.py). The
        head of a group pinned to an active client is filed for it
        (``A/``; ``cl`` on a ``d/`` entry, which settling checks again).

        A group's head that ``expires`` (ms) before it is due is never
        claimable; it is filed for its expiry instead, marked ``x``: the
        claim that meets it removes it and its group goes on from then
        (SPEC §4), not only once it would have been due."""
        at_expiry = gk is not None and expires is not None \
            and expires <= due
        if at_expiry:
            due = max(expires, now)
        ck = self._holder(gk, now)
        if due > now:
            name = names.delayed_obj(due, pos, message_id, attempt)
        elif ck is not None:
            name = names.pinned_obj(ck, pos, message_id, attempt)
        else:
            name = names.avail_obj(pos, message_id, attempt)
        self.store.put(self.c, name, content_type=names.content_type(
            g=gk, u=client, cl=ck, x=1 if at_expiry else None))

    def _holder(self, gk, now):
        if gk is None or self.sticky is False:
            return None
        return pins.holder(self, gk, now)

    def redeliver(self, claim_id, record, ended, now):
        """Make the messages a claim still holds claimable again after the
        claim's redelivery delay. A member whose latest lock is not this
        claim's (deleted, or already taken again) is left alone. A
        grouped one whose delay outlasts what the claim kept it alive
        for is read first: it may expire before it is due
        (make_available)."""
        due = ended + record['rd'] * 1000
        kept_until = record['e'] + record['g'] * 1000

        def one(member):
            message_id, pos, attempt = member[:3]
            # Records written before the group key or the poster was kept
            # in them are shorter.
            gk, client = (list(member[3:]) + [None, None])[:2]
            if self.latest_lock(message_id) != (attempt, claim_id):
                return
            expires = None
            if gk is not None and due > kept_until:
                message, missing = self.lookup(message_id, now)
                if missing:
                    # Its removal died midway: finish it, advance the
                    # group (an expired one was removed by the lookup).
                    self.finish_removal([(message_id, pos, attempt, gk)], now)
                if message is None:
                    return
                expires = message.expires
            self.make_available(pos, message_id, attempt + 1, due, now,
                                gk, client, expires)

        self.store.parallel(one, record['m'])

    # -- settling ----------------------------------------------------------

    def settle(self, now, along=()):
        """Redeliver expired claims, then promote due delayed entries.

        ``along``: reads sent in the round of settling's own listings.
        Returns whether settling had anything to move (what those reads
        saw of it is stale then) and their results."""
        end = names.ms(now + 1)
        found = self.store.parallel(lambda read: read(), [
            functools.partial(self.store.listing, self.c, prefix,
                              end_marker=prefix + end, limit=SETTLE_BATCH)
            for prefix in ('x/', 'd/')] + list(along))
        hints, delayed = found[:2]
        if hints:
            self.store.parallel(lambda e: self._expire(e['name'], now),
                                hints)
        if delayed:
            self.store.parallel(lambda e: self._promote(e, now), delayed)
            try:
                self.store.delete_many(self.c, [e['name'] for e in delayed])
            except errors.BackendUnavailable as exc:
                # Filed already: an entry left is filed again by the next
                # settle under the same name, and a claim that meets one
                # whose attempt is locked drops it. Not worth a 503.
                LOG.warning('Swift: %d promoted delayed entries of %s left '
                            'for the next settle (%s)', len(delayed),
                            self.c, exc)
        return bool(hints or delayed), found[2:]

    def _promote(self, entry, now):
        """File a due ``d/`` entry under ``a/``; one filed for a sticky
        client (``cl``) goes to ``A/`` while its pin and client last."""
        where = names.parse_entry(entry['name'])[1:]
        params = names.ct_params(entry.get('content_type'))
        if not params.get('cl'):
            self.store.put(self.c, names.avail_obj(*where),
                           content_type=entry.get('content_type'))
            return
        self.make_available(where[0], where[1], where[2], now, now,
                            params.get('g'), params.get('u'),
                            now if params.get('x') else None)

    def _expire(self, hint, now):
        expires, claim_id = names.parse_expiry(hint)
        record = self.claim_record(claim_id)
        if record is not None and record['e'] > now:
            # Renewed: a newer hint exists; this one is stale.
            self.store.delete(self.c, hint)
            return
        if record is not None:
            self.redeliver(claim_id, record, record['e'], now)
        self.store.delete_many(self.c, [names.claim_obj(claim_id), hint])

    def write_claim(self, claim_id, record):
        self.store.put(self.c, names.claim_obj(claim_id),
                       json.dumps(record).encode(),
                       content_type='application/json')


def position_type(message, expires=None, written=None):
    """Content-Type of ``p/<pos>``: what stats need, without a GET; and
    when it is ``written`` (ms), where that is not when the message was
    created (a copy keeps its age): what gc's draft removal goes by."""
    return names.content_type(
        id=message.id, cr=message.created,
        e=message.expires if expires is None else expires, d=message.due,
        g=message.gk, u=message.client,
        w=None if written in (None, message.created) else written)
