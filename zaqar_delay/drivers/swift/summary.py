"""gc's per-queue summary on Swift: a pass over a queue with nothing due
reads a few small listings, not the whole queue.

gc's *deep* pass (driver._gc_queue) lists every ``p/``, ``d/``, ``g/``,
``a/`` and ``l/`` entry of a queue (and, at most every
strays.SWEEP_EVERY_S, ``m/``): TTL expiry, drafts, abandoned locks,
group repair, strays (strays.py). Once one finished, gc writes
``z/gc`` (names.py): the highest position it listed (``p``) and
``next``, the earliest instant anything it saw can fall due: a message's
expiry, an unfiled message becoming a draft (drafts.DRAFT_AGE_S), or
DEEP_EVERY_S after the pass.
A later pass is *light* when, the summary read:

* ``now < next``;
* every ``p/`` entry after ``p`` (posted since) is unexpired and younger
  than DRAFT_AGE_S, so it cannot be a draft yet;
* no ``l/`` lock of a pop, dead-letter move, group move or retention
  removal is older than gc's patience (driver.GC_ABANDONED_S): one that
  is may have lost its node, and a lock of a removed message is a leak
  to delete.

A light pass settles (the bounded ``x/`` and ``d/`` listings every pass
makes) and stops: one HEAD and two listings, of what was posted since
and of the locks (messages in flight or claimed before), none of which
grows with the messages waiting in the queue.

Safe with several gc hosts and after a crash: the summary only decides
whether to look, never what to remove, and is written after a deep pass
finished, from what that pass listed. A host that dies midway leaves the
previous summary, which still calls for a deep pass. An older summary
written over a newer one (a slow host) makes passes look at more, never
less: its ``p`` is lower, so more entries count as posted since, and its
``next`` came from fewer messages (expiries only grow: claims extend
them).

The summary also keeps ``sw``, when a deep pass last swept the queue's
strays (strays.py), which is done at most every strays.SWEEP_EVERY_S.

What waits for the backstop (a deep pass at least every DEEP_EVERY_S):
a group left without a filed head when its remover died between its
bulk delete and advancing the group, a claim lock whose claim vanished
(clock skew beyond the claim margin: driver._heal_orphans), a
message whose position landed below ``p`` (posted on a node whose clock
is behind while gc listed), and a stray ``m/`` (strays.py).
"""

import datetime

from zaqar_delay.drivers.swift import drafts
from zaqar_delay.drivers.swift import names

# The backstop: crash leftovers only a deep pass finds wait at most this.
DEEP_EVERY_S = 600


def read(qs):
    """The summary's fields (names.py, ``z/gc``), or None."""
    found = qs.store.head(qs.c, names.GC_SUMMARY)
    return None if found is None else names.ct_params(
        found.get('content-type'))


def quiet(qs, params, now, patience_s):
    """True if gc's deep pass has nothing to find in the queue now (the
    module docstring); ``params``: the summary read (read()),
    ``patience_s``: how old a taken lock may be."""
    if params is None:
        return False
    try:
        seen, due = int(params['p']), int(params['next'])
    except (KeyError, ValueError):
        return False
    if now >= due:
        return False
    marker = names.position_obj(seen) if seen >= 0 else None
    fresh, locks = qs.store.parallel(
        lambda args: qs.store.listing_all(qs.c, *args),
        [('p/', marker), ('l/', None)])
    young = now - drafts.DRAFT_AGE_S * 1000
    for entry in fresh:
        fields = names.position_fields(entry)
        if fields is not None and (fields['e'] <= now
                                   or fields['w'] < young):
            return False
    return not any(abandoned(entry, now, patience_s) for entry in locks)


def abandoned(lock, now, patience_s):
    """True for an ``l/`` entry held by a pop, dead-letter move, group
    move or retention removal for longer than ``patience_s`` since it was
    written or last renewed (``r``, ms: a group move renews its lock as
    it goes)."""
    params = names.ct_params(lock.get('content_type'))
    if params.get('c') not in names.TAKEN:
        return False
    idle_s = age_s(lock, now)
    if params.get('r'):
        idle_s = min(idle_s, (now - int(params['r'])) / 1000)
    return idle_s > patience_s


def age_s(entry, now_ms):
    """Seconds since a listing entry was last written."""
    modified = datetime.datetime.fromisoformat(
        entry['last_modified']).replace(tzinfo=datetime.timezone.utc)
    return now_ms / 1000 - modified.timestamp()


def swept(params, now):
    """When a deep pass last swept the queue's strays (ms; 0: never, the
    sweep left work, or a time after ``now``, written by a host whose
    clock ran ahead, which would hold every sweep back that long):
    strays.py sweeps at most every SWEEP_EVERY_S."""
    try:
        when = int((params or {}).get('sw', 0))
    except ValueError:
        return 0
    return when if when <= now else 0


def write(qs, now, highest, positions, filed, more, last_sweep=0):
    """After a deep pass at ``now``: ``highest`` position it listed (None:
    none), ``positions`` (id -> ``p/`` fields) of the messages left,
    ``filed`` the ids that exist; ``more`` if it left work for the next
    pass (a batch bound was hit); ``last_sweep``: swept() from now on."""
    due = now if more else now + DEEP_EVERY_S * 1000
    draft_after = drafts.DRAFT_AGE_S * 1000
    for message_id, fields in positions.items():
        due = min(due, fields['e'])
        # Unfiled and older were removed as drafts by this pass (or
        # ``more`` says the rest wait).
        if message_id not in filed and fields['w'] + draft_after >= now:
            due = min(due, fields['w'] + draft_after)
    # A plain PUT would create the container again if the queue was
    # deleted meanwhile: a 404 means there is nothing left to summarise.
    qs.store.call('put_object', qs.c, names.GC_SUMMARY, b'',
                  content_type=names.content_type(
                      p=-1 if highest is None else highest, next=due,
                      sw=last_sweep or None),
                  expect=(404,))
