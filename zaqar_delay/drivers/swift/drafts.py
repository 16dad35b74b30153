"""Half-written messages on Swift ("drafts") and what makes one whole.

A post writes, in this order: ``p/`` (its position), ``m/`` (the message),
``g/`` (group membership, grouped messages only), and only then files the
message for claiming (``a/`` or ``d/``; for a group member, its ``g/``
entry is its filing: the head is filed from it). A message **exists**
from its filing on, and keeps one of ``a/``, ``d/``, ``g/`` or ``l/``
(a lock) until it is removed. A post cut short before its filing leaves a
draft: a ``p/`` and perhaps an ``m/`` that no claim can find. Readers
and stats ignore drafts; gc removes those older than DRAFT_AGE_S, at most
SETTLE_BATCH per queue and pass. The post was not acknowledged, so a
draft is nothing a client was promised. (A post that dies after giving
back positions it lost to another node leaves ``m/`` objects with no
``p/``: gc removes them as strays, strays.py.)

A message moves ``d/`` -> ``a/`` -> ``l/`` (settling, claiming), and each
step writes the new entry before deleting the old one; the indexes are
read in that order, so a message that moves meanwhile is still seen.

A post that fails (its caller gets an error) takes back what it left
unfiled at once (withdraw), not after DRAFT_AGE_S: until then its
positions count in retention's ``length`` cut (retention.py), and a cut
stored meanwhile keeps older messages out for good. Only a post that
dies, or whose Swift fails that too, leaves drafts for gc.
"""

import logging

from zaqar_delay import errors
from zaqar_delay.drivers.swift import consumers as swift_consumers
from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import state

LOG = logging.getLogger(__name__)

# A post older than this has long finished or died (gc's patience).
DRAFT_AGE_S = 60


def indexes(qs, first=()):
    """The d/, g/, a/ and l/ listings, read in the order messages move,
    after the listings ``first`` ((prefix, marker) each, read with d/ and
    g/, their results first in the answer)."""
    found = qs.store.parallel(
        lambda args: qs.store.listing_all(qs.c, *args),
        list(first) + [('d/',), ('g/',)])
    ready = qs.store.listing_all(qs.c, 'a/')
    return found + [ready, qs.store.listing_all(qs.c, 'l/')]


def filed_ids(delayed, members, ready, locks):
    """Ids of the messages that exist, from ``indexes()``."""
    ids = {names.parse_entry(e['name'])[-2] for e in delayed + ready}
    ids.update(names.parse_group_entry(e['name'])[2] for e in members)
    ids.update(names.parse_lock(e['name'])[0] for e in locks)
    return ids


def is_filed(qs, message, attempts, now):
    """True if ``message`` (read from ``m/``, ``attempts`` locks seen) was
    ever filed (filed_by_name)."""
    return bool(attempts) or filed_by_name(
        qs, message.id, message.pos, message.gk, message.due, now)


def filed_by_name(qs, message_id, pos, gk, due, now):
    """True if the message was ever filed: 1-2 HEADs of the names its
    first filing has, then its locks again, in case a claim took it
    meanwhile. Asked by name because a listing can lag behind a write
    (state.QueueState.latest_lock)."""
    if gk is not None:
        candidates = [names.group_obj(gk, pos, message_id)]
    else:
        delayed = names.delayed_obj(due, pos, message_id, 1)
        ready = names.avail_obj(pos, message_id, 1)
        # Settling writes a/ before deleting d/: look at d/ before a/.
        candidates = ([delayed, ready] if due > now
                      else [ready, delayed, ready])
    for name in candidates:
        if qs.store.head(qs.c, name) is not None:
            return True
    return qs.latest_lock(message_id)[0] > 0


def live_positions(qs, listed):
    """``listed`` (``p/`` fields, in order) but the positions a copy made
    again elsewhere left (posts.store: a call cut short before it stored
    any of its batch), which name the id of a message stored at another
    position: those go (the ``p/`` alone), and are never taken for that
    message, whose claim may have moved its expiry past theirs. Only an
    id named twice costs a read, of its ``m/``."""
    seen = {}
    for fields in listed:
        seen[fields['id']] = seen.get(fields['id'], 0) + 1
    twice = [mid for mid, count in seen.items() if count > 1]
    if not twice:
        return listed
    stored = dict(zip(twice, qs.store.parallel(
        lambda mid: qs.store.get_json(qs.c, names.message_obj(mid)),
        twice)))
    at = {mid: found[1].get('p') for mid, found in stored.items()
          if found is not None}
    # An id with no m/ yet may be a call's still storing it: its
    # positions are left to clean(), which waits for the draft age.
    left = [f for f in listed
            if f['id'] in at and at[f['id']] != f['pos']]
    _drop_positions(qs, left)
    gone = {f['pos'] for f in left}
    return [f for f in listed if f['pos'] not in gone]


def _drop_positions(qs, left):
    if left:
        swift_consumers.mark_gone(qs, [f['pos'] for f in left])
        qs.store.delete_many(qs.c, [names.position_obj(f['pos'])
                                    for f in left])


def clean(qs, positions, filed, now):
    """gc: remove drafts (``positions``: id -> ``p/`` fields; ``filed``:
    ids that exist), those written over DRAFT_AGE_S ago, at most
    SETTLE_BATCH. Returns how many it looked at (SETTLE_BATCH: more may
    be waiting)."""
    old = now - DRAFT_AGE_S * 1000
    suspects = [fields for mid, fields in positions.items()
                if mid not in filed and fields['w'] < old]
    suspects = suspects[:state.SETTLE_BATCH]
    # The listings can lag behind a filing: each suspect is asked by name
    # before it goes, or an acknowledged post could be removed.
    drafts = [fields for fields, found in zip(suspects, qs.store.parallel(
        lambda f: filed_by_name(qs, f['id'], f['pos'], f['g'], f['d'], now),
        suspects)) if not found]
    if drafts:
        _remove(qs, drafts, now)
    return len(suspects)


def withdraw(qs, messages, now):
    """Remove what a failing post of ``messages`` (state.Message) left
    unfiled: after a settle wait, so a rival's PUT racing one of its
    positions has landed, a position still naming the post's message,
    whose filing no name shows (filed_by_name: one that has it is a
    message, left to its readers). Best effort: a Swift error leaves
    the rest to gc."""
    placed = [m for m in messages if m.pos is not None]
    if not placed:
        return
    try:
        qs.store.settle_wait()
        heads = qs.store.parallel(lambda m: qs.store.head(
            qs.c, names.position_obj(m.pos)), placed)
        ours = [m for m, head in zip(placed, heads) if head is not None
                and names.ct_params(head.get('content-type')).get('id')
                == m.id]
        filed = qs.store.parallel(lambda m: filed_by_name(
            qs, m.id, m.pos, m.gk, m.due, now), ours)
        left = [{'id': m.id, 'pos': m.pos, 'g': m.gk}
                for m, found in zip(ours, filed) if not found]
        if left:
            _remove(qs, left, now)
    except errors.BackendUnavailable as exc:
        LOG.warning('Swift: a failed post\'s drafts in %s are left to gc: '
                    '%s', qs.c, exc)


def _remove(qs, drafts, now):
    """Remove ``drafts`` (``p/`` fields). Only a draft whose ``m/`` is
    stored at its position takes its message (and its ``r/`` marker, so
    that a copy cut short is not skipped as consumed by the next copy of
    it). Any other is a position alone: one a post or copy took and never
    wrote to, or a copy made again elsewhere left (posts.store), whose
    id's ``m/`` and ``r/``, if any, belong to that copy, or mark it
    consumed: only the ``p/`` goes."""
    stored = qs.store.parallel(
        lambda f: qs.store.get_json(qs.c, names.message_obj(f['id'])),
        drafts)
    whole = [f for f, found in zip(drafts, stored)
             if found is not None and found[1].get('p') == f['pos']]
    taken = {f['pos'] for f in whole}
    alone = [f for f in drafts if f['pos'] not in taken]
    if whole:
        # The marker first: a gc dying in between leaves a draft the
        # next pass removes, never a marker whose message is gone.
        qs.store.delete_many(qs.c, [names.received_obj(f['id'])
                                    for f in whole])
        qs.remove([(f['id'], f['pos'], 0, f['g']) for f in whole], now)
    _drop_positions(qs, alone)
