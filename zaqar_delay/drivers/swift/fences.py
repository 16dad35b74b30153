"""How far persistent consumers' pages reached, for posts still in flight.

A post takes positions after the last one listed and PUTs them; a later
post can file its messages first, above them. A consumer page that hands
out those later messages must not let the cursor pass a position the
slow post is about to take. Both sides write, then read:

* a consumer page PUTs ``h/<its last position>`` (a fence), then lists
  ``p/`` up to that position for drafts it must stop before
  (messages.py, ``_settled_prefix``);
* a post, once its ``p/`` PUTs were answered, lists the highest fence
  in their settle wait (posts.allocate); a position of its at or below
  it moves the post after the fence, as a position a rival took does.

Whichever of the two writes landed first, the other side's read sees it:
either the page finds the draft, or the post finds the fence. Fences are
named by position, so the highest one is the furthest any page reached
whatever order pages wrote them in; a page deletes the fence it started
from once its own is written, and gc's sweep the ones left below the
highest (``prune``).
"""

import logging

from zaqar_delay import errors
from zaqar_delay.drivers.swift import names

LOG = logging.getLogger(__name__)

PREFIX = 'h/'
PRUNE_BATCH = 1000


def fence_obj(position):
    return PREFIX + names.pos(position)


def raise_to(qs, position, started_from):
    """Before a consumer page's listing of drafts: the page reaches
    ``position``. The fence of ``started_from`` (the page's start: the
    previous page's end, where this consumer put its last fence) goes
    after, with that listing: ``after()`` runs beside it."""
    qs.store.put(qs.c, fence_obj(position))

    def after():
        if started_from is None or started_from >= position:
            return
        try:
            qs.store.delete(qs.c, fence_obj(started_from))
        except errors.BackendUnavailable as exc:
            # The page is right without it; gc's sweep deletes it.
            LOG.warning('Could not delete fence %s in %s: %s',
                        started_from, qs.c, exc)
    return after


def highest(qs):
    """The furthest position a consumer page reached, or None."""
    top = qs.store.listing(qs.c, PREFIX, limit=1, reverse=True)
    return int(top[0]['name'][len(PREFIX):]) if top else None


def prune(qs):
    """Delete up to PRUNE_BATCH fences below the highest; how many."""
    top = highest(qs)
    if top is None:
        return 0
    below = qs.store.listing(qs.c, PREFIX, end_marker=fence_obj(top),
                             limit=PRUNE_BATCH)
    qs.store.delete_many(qs.c, [entry['name'] for entry in below])
    return len(below)
