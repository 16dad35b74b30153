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
their ids and are written after the wait, as one stored before may have
to take its stored position instead.
"""

import json
import logging
import random

from zaqar_delay import errors
from zaqar_delay import rules
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
        allocate(qs, stored, now)
        return qs.store.parallel(lambda m: _store_copy(qs, m), stored)
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
    If-None-Match so no other node can take it too; ``meanwhile`` runs in
    each attempt's settle wait (connection.Store.settle_wait), ``moved``
    after an attempt that lost a position gave the others back."""
    for _ in range(POSITION_ATTEMPTS):
        base = first_free(qs, now)
        for offset, message in enumerate(stored):
            message.pos = base + offset
        won = qs.store.create_many(qs.c, [
            (names.position_obj(m.pos), dict(
                content_type=swift_state.position_type(m),
                headers=qs.delete_at(m.expires), container_meta=qs.meta))
            for m in stored], meanwhile=meanwhile)
        if all(won):
            return
        # Someone posted into our range: give ours back, list again.
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
            # Swift's X-Delete-At removes them once they expire.
            LOG.warning('Could not delete %d messages a post left in %s: '
                        '%s', len(written), self.qs.c, exc)


def _store_copy(qs, message):
    if qs.store.head(qs.c, names.received_obj(message.id)) is not None:
        # Copied here before: still here (filed again, in case that copy
        # was cut short), or consumed (skipped).
        created = False
    else:
        created = _put_message(qs, message, exclusive=True)
    if not created and not _adopt(qs, message, copies=True):
        qs.store.delete(qs.c, names.position_obj(message.pos))
        return False
    # Before it can be claimed, so before it can be deleted.
    qs.store.put(qs.c, names.received_obj(message.id),
                 headers=qs.delete_at(message.expires
                                      + names.RECEIVED_MEMORY_S * 1000))
    return True


def _put_message(qs, message, exclusive):
    record = {'b': message.body, 't': message.ttl, 'cr': message.created,
              'e': message.expires, 'd': message.due, 'u': message.client,
              'p': message.pos, 'g': message.group}
    if message.checksum:
        record['cs'] = message.checksum
    return qs.store.put(
        qs.c, names.message_obj(message.id),
        json.dumps(record, ensure_ascii=False).encode(),
        content_type='application/json',
        headers=dict(qs.delete_at(message.expires),
                     **{swift_state.META_E: message.expires}),
        exclusive=exclusive)


def _adopt(qs, message, copies):
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
    qs.store.delete(qs.c, names.position_obj(message.pos))
    message.pos, message.due, message.group = (record['p'], record['d'],
                                               record.get('g'))
    return True
