"""Storing posted messages on Swift, before they are filed (drafts.py).

Positions are taken with conditional PUTs (``If-None-Match: *`` on
``p/<position>``) and read back after ``create_settle_time``
(connection.Store.create), so two API nodes never share a position; each
message is stored under its id with another conditional PUT, so a retried
post or a repeated dead-letter copy never duplicates a message.

A post writes its messages while its positions settle: Swift is idle
during that wait, and a message is a draft, which nobody sees, until its
filing, which still waits for every position to be read back. When a
rival takes one of the positions, the post moves to new ones under new
ids (it made them up, and has returned none yet): an ``m/`` object is
written once, never overwritten, as a read can return an older version
of an object Swift replaced; the objects written under the old ids, never
filed, are deleted. Copies (dead letters, moved groups, migration) keep
their ids: what an earlier call stored of them is read first, and keeps
its position (_store_copies).
"""

import functools
import json
import logging
import random

from zaqar_delay import errors
from zaqar_delay import rules
from zaqar_delay.drivers.swift import fences
from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import state as swift_state

LOG = logging.getLogger(__name__)

# A position is created ms * POS_PER_MS + n: positions follow the clock
# between nodes and never go back behind the last one listed.
POS_PER_MS = names.POS_PER_MS
POSITION_ATTEMPTS = 5


def store(qs, stored, now, copies=False):
    """Give each of ``stored`` (state.Message, ``pos`` unset) a free
    position, in posting order, and store it; for each, True if it was
    stored and is to be filed. One refused (its id is stored already, and
    not by this post or, for a copy, not here any more) gives its position
    back. Unless they are ``copies``, the ids are the post's own, and a
    message may get a new one."""
    if copies:
        return _store_copies(qs, stored, now)
    writes = _Writes(qs, stored)
    try:
        allocate(qs, stored, now, meanwhile=writes, moved=writes.move)
    except errors.BackendUnavailable:
        writes.abandon()
        raise
    qs.store.parallel(
        lambda m: qs.store.delete(qs.c, names.position_obj(m.pos)),
        [m for m, ok in zip(stored, writes.ours) if not ok])
    return writes.ours


def first_free(qs, now):
    """The position a post starts from: after the last one listed, and
    following the clock."""
    last = qs.store.listing(qs.c, 'p/', limit=1, reverse=True)
    return max(now * POS_PER_MS + random.randrange(POS_PER_MS // 2),
               int(last[0]['name'][2:]) + 1 if last else 0)


def allocate(qs, stored, now, meanwhile=None, moved=None):
    """Give ``stored`` consecutive positions, each taken with
    If-None-Match so no other node can take it too, and none behind a
    consumer page's fence (fences.py); ``meanwhile`` runs in each
    attempt's settle wait (connection.Store.settle_wait), ``moved`` after
    an attempt that lost a position gave the others back."""
    floor, lost, passed_by = 0, 0, 0
    while lost < POSITION_ATTEMPTS and passed_by < POSITION_ATTEMPTS:
        base = max(first_free(qs, now), floor)
        for offset, message in enumerate(stored):
            message.pos = base + offset
        fence = []
        # No X-Delete-At on a position (names.py, p/): Swift's expiry
        # queue costs every PUT and DELETE of it, and readers go by its
        # ``e``; whoever removes the message removes it, gc the expired.
        won = qs.store.create_many(qs.c, [
            (names.position_obj(m.pos), dict(
                content_type=swift_state.position_type(m, written=now),
                container_meta=qs.meta))
            for m in stored], meanwhile=meanwhile, recreate=True,
            alongside=lambda: fence.append(fences.highest(qs)))
        # A page handed out the fence's own position too.
        passed = fence[0] is not None and base <= fence[0]
        if all(won) and not passed:
            return
        # Someone posted into our range, or a consumer page passed it
        # while our PUTs were in flight: give ours back, go after both.
        if passed:
            floor = max(floor, fence[0] + 1)
            passed_by += 1
        if not all(won):
            lost += 1
        qs.store.delete_many(qs.c, [
            names.position_obj(m.pos) for m, ok in zip(stored, won) if ok])
        if moved is not None:
            moved()
    raise errors.BackendUnavailable(
        backend='Swift',
        reason='could not allocate message positions in {}'.format(qs.c))


class _Writes:
    """A post's ``m/`` writes, run while its positions settle."""

    def __init__(self, qs, stored):
        self.qs, self.stored = qs, stored
        # Per message, once written: whether ``m/`` is this post's.
        self.ours = None
        self.written = []

    def __call__(self):
        # Every write answered before a failure is raised, so that
        # abandon() knows all this post wrote.
        outcomes = self.qs.store.parallel(self._create, self.stored)
        for outcome in outcomes:
            if isinstance(outcome, errors.BackendUnavailable):
                raise outcome
        self.ours = outcomes

    def move(self):
        """Before the next positions are taken (their ``p/`` names the
        ids): new ids, and the objects written under the old ones go."""
        self.abandon()
        for message, new_id in zip(
                self.stored, rules.new_message_ids(len(self.stored))):
            message.id = new_id

    def _create(self, message):
        try:
            ours = (_put_message(self.qs, message, exclusive=True)
                    or _adopt(self.qs, message, copies=False))
        except errors.BackendUnavailable as exc:
            return exc
        if ours:
            self.written.append(names.message_obj(message.id))
        return ours

    def abandon(self):
        """Delete what this post wrote: never filed, and with no position
        of its own gc would not find it as a draft."""
        written, self.written = self.written, []
        try:
            self.qs.store.delete_many(self.qs.c, written)
        except errors.BackendUnavailable as exc:
            # gc removes them (strays.py).
            LOG.warning('Could not delete %d messages a post left in %s: '
                        '%s', len(written), self.qs.c, exc)


def _store_copies(qs, stored, now):
    """``store`` of copies, which keep their ids: what an earlier call
    (cut short, or that made it) stored already is read first, each
    message's ``r/`` marker and ``m/`` in one parallel round. One still
    here keeps its stored position and fields and is filed again (filing
    twice is harmless); one with a marker and no message was consumed
    here, and is skipped. The others take their own positions of the
    call cut short where it stored some of the batch (_positions_taken),
    so the batch keeps its order and leaves no position behind; the rest
    go after the last position listed."""
    reads = qs.store.parallel(lambda read: read(), [
        functools.partial(qs.store.head, qs.c, names.received_obj(m.id))
        for m in stored] + [
        functools.partial(qs.store.get_json, qs.c, names.message_obj(m.id))
        for m in stored])
    markers, found = reads[:len(stored)], reads[len(stored):]
    before, as_stored = {}, []
    kept = [True] * len(stored)
    for index, (message, marker, copy) in enumerate(zip(stored, markers,
                                                        found)):
        if copy is not None:
            before[index] = _take_stored(message, copy[1])
            as_stored.append(swift_state.Message(message.id, *copy))
        elif marker is not None:
            kept[index] = False
    fresh = [i for i, ok in enumerate(kept) if ok and i not in before]
    placed = _positions_taken(qs, stored, before, fresh)
    # Positions the call cut short wrote are written again now, for gc's
    # draft removal, which goes by when a position was written: those of
    # copies stored then as they are stored (a claim may have moved the
    # expiry since), those taken back as this call stores them. One gone
    # meanwhile (POST never creates) is taken afresh.
    again = [stored[i] for i in sorted(placed)]
    rewritten = qs.store.parallel(lambda m: qs.store.post(
        qs.c, names.position_obj(m.pos), {
            'Content-Type': swift_state.position_type(m, written=now)}),
        as_stored + again)
    placed -= {i for i, ok in zip(sorted(placed), rewritten[len(as_stored):])
               if not ok}
    rest = [stored[i] for i in fresh if i not in placed]
    if rest:
        allocate(qs, rest, now)
    fresh_kept = qs.store.parallel(
        lambda i: _store_copy(qs, stored[i], own_position=i not in placed),
        fresh)
    for index, ok in zip(fresh, fresh_kept):
        kept[index] = ok
    # Before a copy can be claimed, so before it can be deleted; again
    # for one stored before, whose call may have died before its marker.
    qs.store.parallel(lambda m: qs.store.put(
        qs.c, names.received_obj(m.id), headers=qs.delete_at(
            m.expires + names.RECEIVED_MEMORY_S * 1000)),
        [m for m, ok in zip(stored, kept) if ok])
    return kept


def _take_stored(message, record):
    """``message`` takes the position and fields of its stored copy."""
    message.pos, message.due, message.group = (record['p'], record['d'],
                                               record.get('g'))
    return record['p']


def _positions_taken(qs, stored, before, missing):
    """A call cut short took consecutive positions for its batch and
    stored some of it: the ``missing`` (indexes) take their own positions
    of that call back, read by name (its ``p/`` names the id), so they
    are not filed after messages posted after them, and no position of
    theirs is left behind. Where this batch is not aligned with the one
    cut short (gc's copy of a group puts the head, copied by an earlier
    batch, first), each missing message's position is taken from its
    nearest stored neighbours on either side: one of them was in its
    batch. Returns the indexes placed; any other goes after the last
    position, as before."""
    if not missing or not before:
        return set()
    known = sorted(before)
    guesses = []
    for index in missing:
        lower = [k for k in known if k < index]
        upper = [k for k in known if k > index]
        options = set()
        if lower:
            options.add(before[lower[-1]] + index - lower[-1])
        if upper:
            options.add(before[upper[0]] - (upper[0] - index))
        guesses += [(index, position) for position in sorted(options)]
    heads = qs.store.parallel(
        lambda guess: qs.store.head(qs.c, names.position_obj(guess[1])),
        guesses)
    placed = set()
    for (index, position), head in zip(guesses, heads):
        if index not in placed and head is not None and names.ct_params(
                head.get('content-type')).get('id') == stored[index].id:
            stored[index].pos = position
            placed.add(index)
    if any(i < max(before) for i in missing if i not in placed):
        LOG.warning('Swift: copies into %s go after the last position, '
                    'not to where a call cut short had them', qs.c)
    return placed


def _store_copy(qs, message, own_position=True):
    """Store one copy at its position; True if it is to be filed (it was
    stored, or a racing call stored it: see _adopt). A position this
    call did not take (``own_position`` False: one taken back from a
    call cut short) is never given back: a racing call may use it."""
    created = _put_message(qs, message, exclusive=True)
    if created and _filed_elsewhere(qs, message):
        # Not there when this call read it (_store_copies): another call
        # (gc finishing a move this one stalled in) stored the copy
        # meanwhile, and its consumer deleted it. Stored again, it would
        # be handed out twice.
        qs.store.delete(qs.c, names.message_obj(message.id))
        created = False
    elif not created and _adopt(qs, message, copies=True,
                                own_position=own_position):
        return True
    if not created:
        if own_position:
            qs.store.delete(qs.c, names.position_obj(message.pos))
        return False
    return True


def _filed_elsewhere(qs, message):
    """True when the copy's ``r/`` marker is older than the ``m/`` this
    call just stored: another call filed its own copy before, and its
    consumer deleted it since. A marker written after it is another
    call's filing of this very copy (gc, taking over from a stalled
    mover, found it stored and filed it): kept. Both times are Swift's
    (X-Timestamp), so API node clocks do not matter. The copy is read
    only when a marker exists (seldom): one HEAD per copy otherwise."""
    marker = qs.store.head(qs.c, names.received_obj(message.id))
    if marker is None:
        return False
    ours = qs.store.head(qs.c, names.message_obj(message.id))
    return (ours is not None
            and float(marker['x-timestamp']) < float(ours['x-timestamp']))


def _put_message(qs, message, exclusive):
    record = {'b': message.body, 't': message.ttl, 'cr': message.created,
              'e': message.expires, 'd': message.due, 'u': message.client,
              'p': message.pos, 'g': message.group}
    if message.checksum:
        record['cs'] = message.checksum
    # No X-Delete-At (names.py, ``m/``): Swift's expiry queue costs its
    # PUT and its DELETE a container update each; gc removes what is left
    # (strays.py).
    return qs.store.put(
        qs.c, names.message_obj(message.id),
        json.dumps(record, ensure_ascii=False).encode(),
        content_type='application/json',
        headers={swift_state.META_E: message.expires},
        exclusive=exclusive)


def _adopt(qs, message, copies, own_position=True):
    """The id is stored already: True if it is ours (a retried PUT)
    or, for a copy, if it is still here (a copy cut short before its
    filing, or one that made it): then ``message`` takes its position
    and fields and is filed again, under the same names, so filing
    twice is harmless. False if it must be skipped."""
    found = qs.store.get_json(qs.c, names.message_obj(message.id))
    if found is None:
        # A post's PUT was refused, so its object exists: the read lags
        # the write (python-swiftclient resent a PUT whose reply was
        # lost, and the first one landed). The id was made up by this
        # post: the object is its own.
        return not copies
    record = found[1]
    if record['p'] == message.pos:
        return True
    if not copies:
        return False
    # Give our position back; the stored one is where it belongs.
    if own_position:
        qs.store.delete(qs.c, names.position_obj(message.pos))
    _take_stored(message, record)
    return True
