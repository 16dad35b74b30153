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
draft is nothing a client was promised.

A message moves ``d/`` -> ``a/`` -> ``l/`` (settling, claiming), and each
step writes the new entry before deleting the old one; the indexes are
read in that order, so a message that moves meanwhile is still seen.
"""

from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import state

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
    ever filed: 1-2 HEADs of the names its first filing has, then its
    locks again, in case a claim took it meanwhile."""
    if attempts:
        return True
    if message.gk is not None:
        candidates = [names.group_obj(message.gk, message.pos, message.id)]
    else:
        delayed = names.delayed_obj(message.due, message.pos, message.id, 1)
        ready = names.avail_obj(message.pos, message.id, 1)
        # Settling writes a/ before deleting d/: look at d/ before a/.
        candidates = ([delayed, ready] if message.due > now
                      else [ready, delayed, ready])
    for name in candidates:
        if qs.store.head(qs.c, name) is not None:
            return True
    return qs.latest_lock(message.id)[0] > 0


def clean(qs, positions, filed, now):
    """gc: remove drafts (``positions``: id -> ``p/`` fields; ``filed``:
    ids that exist), those written over DRAFT_AGE_S ago, at most
    SETTLE_BATCH. Returns how many."""
    old = now - DRAFT_AGE_S * 1000
    drafts = [fields for mid, fields in positions.items()
              if mid not in filed and fields['cr'] < old]
    drafts = drafts[:state.SETTLE_BATCH]
    if drafts:
        qs.remove([(f['id'], f['pos'], 0, f['g']) for f in drafts], now)
        # A dead-letter or move copy cut short: its r/ marker must not
        # make gc's next copy of it be skipped.
        qs.store.delete_many(qs.c, [names.received_obj(f['id'])
                                    for f in drafts])
    return len(drafts)
