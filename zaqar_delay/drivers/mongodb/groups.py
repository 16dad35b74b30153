"""Message groups on MongoDB: group heads, listing, purge and repair.

Every member of a group carries its group id ``g``. Exactly one live
member, the *head*, also carries ``h`` (= ``g``); only the head may be
ready, delayed or claimed, every other member waits in state ``b``
(blocked), outside the key ranges of ``{p, q, s, k}`` and ``{p, q, s, d}``
that claims and due-promotion read. So a claim never sees a blocked
message, and a claim of any size gets at most one message per group.

The unique index ``zd_group_head`` on ``{p, q, h}`` (partial: only heads
are in it) is what makes "at most one head" hold under any concurrency:
promoting a second member of a group is a duplicate key, whichever
process tries it. A head keeps ``h`` through ready, delayed, claimed and
back; it loses it only by leaving the queue (deleted, expired, popped,
dead-lettered, moved), and then :func:`advance` promotes the next one.

Advancing is idempotent and needs no lock: it promotes the group's
lowest-position live member, by a single-document update whose filter
still says ``s: b``, if and only if the group has no live head. A crash
between a head leaving and the advance leaves a group with no head (its
members stay blocked: safe, but stuck); :func:`repair`, run by ``gc()``,
walks every group of a queue and advances those without a head.
"""

import json

from oslo_log import log as logging
from pymongo import errors as mongo_errors

from zaqar_delay.drivers.mongodb import fields as f
from zaqar_delay.drivers.mongodb import pins
from zaqar_delay.drivers.mongodb import queries

LOG = logging.getLogger(__name__)

# Tries of one advance; each retry means another process changed the
# group in between. Giving up is safe: the group waits for gc's repair.
ADVANCE_ATTEMPTS = 8
# Groups checked per queue per gc pass; the next pass resumes after them.
REPAIR_BATCH = 1000
# Members one request of a group's purge deletes (Redis and Swift purge
# a page of 100 at a time too).
PURGE_BATCH = 100


def advance(driver, queue, project, group, now, pinned=True):
    """Give ``group`` a head if it has live members and none; return it.

    Returns the head document, or the group's first member while a group
    move holds it (state ``m``), or None for an empty group. ``pinned``
    False: the caller removed the group's head and it carried no pin
    (``pn``), so the group has none to copy and no pin is looked up; a
    pinned group's heads always carry it (pins.py).
    """
    messages = driver.messages
    for _ in range(ADVANCE_ATTEMPTS):
        query = queries.group_head(queue, project, group)
        found = messages.find(query.filter, None, None, 1, query.index)
        if found:
            head = found[0]
            if head[f.EXPIRES] > now:
                return head
            # An expired head holds up nobody: drop it, look again.
            pinned = pinned or f.PIN in head
            messages.delete_one(dict(query.filter, _id=head['_id'], **{
                f.EXPIRES: {'$lte': now}}))
            continue
        query = queries.group_first(queue, project, group, now)
        found = messages.find(query.filter, None, query.sort, 1, query.index)
        if not found:
            return None
        first = found[0]
        if first[f.STATE] not in (f.BLOCKED, f.WAITING):
            if f.HEAD in first:
                continue        # promoted since the probe above
            return first        # frozen by a move (or a pre-groups doc)
        promoted = _promote(driver, queue, project, group, first, now,
                            pinned)
        if promoted is not None:
            return promoted
    LOG.warning('group %s of queue %s/%s: no head after %d tries; gc '
                'will repair it', group, project, queue, ADVANCE_ATTEMPTS)
    return None


def _promote(driver, queue, project, group, doc, now, pinned):
    """``b -> r|d`` with ``h`` set, and the group's pin if it has one
    (pins.py): the new head, or None if refused."""
    changes = {f.STATE: f.DELAYED if doc[f.DUE] > now else f.READY,
               f.HEAD: group}
    client = pins.head_pin(driver, queue, project, group) if pinned else None
    if client is not None:
        changes[f.PIN] = client
    try:
        result = driver.messages.update_one(
            f.queue_filter(queue, project, **{
                '_id': doc['_id'], f.GROUP: group,
                f.STATE: {'$in': [f.BLOCKED, f.WAITING]}}),
            {'$set': changes})
    except mongo_errors.DuplicateKeyError:
        return None             # another member became head meanwhile
    if not result.matched_count:
        return None             # it left the queue or changed meanwhile
    if client is not None:
        pins.recheck_head(driver, queue, project, group, doc['_id'], client)
    return dict(doc, **changes)


def advance_all(driver, queue, project, groups, now, pinned=True):
    """:func:`advance` each distinct group id in ``groups`` (None: skip)."""
    for group in dict.fromkeys(groups):
        if group is not None:
            advance(driver, queue, project, group, now, pinned)


def groups_of(docs):
    """The group ids of stored documents, None for ungrouped ones."""
    return [doc.get(f.GROUP) for doc in docs]


def page(driver, queue, project, marker, limit, now):
    """Up to ``limit`` groups after the encoded id ``marker``.

    One index probe per group finds the next group id (a skip scan of
    ``{p, q, g, k}``); the caller has purged expired messages, so the
    depth is a count over that index alone.
    """
    out, after = [], marker
    while len(out) < limit:
        query = queries.next_group(queue, project, after)
        found = driver.messages.find(query.filter, {f.GROUP: True},
                                     query.sort, 1, query.index)
        if not found:
            break
        after = found[0][f.GROUP]
        head = advance(driver, queue, project, after, now)
        if head is None:
            continue
        members = queries.group_members(queue, project, after)
        out.append({
            'id': after,
            'depth': driver.messages.count_documents(members.filter),
            'head': head['_id'],
            'in_flight': (head[f.STATE] == f.CLAIMED
                          and head.get(f.CLAIM_EXPIRES, 0) > now)})
    clients = pins.clients_of(driver, queue, project,
                              [group['id'] for group in out], now)
    for group in out:
        group['client'] = clients.get(group['id'])
        group['id'] = json.loads(group['id'])
    return out


def purge(driver, queue, project, group, now):
    """Delete every member of ``group``, claimed or not; how many.

    PURGE_BATCH members a request, from the tail, as on Redis and Swift:
    the head goes last, so a purge cut short leaves the group's first
    members with their head. A message of the group posted while this
    runs may survive it; the advance afterwards gives it a head (its
    poster's own advance may have run while the old head still stood).
    """
    members = queries.group_members(queue, project, group)
    deleted = driver.messages.delete_all(
        members.filter, [(f.POSITION, -1)], PURGE_BATCH)
    advance(driver, queue, project, group, now)
    return deleted


def repair(driver, queue, project, now, cursor=None, batch=REPAIR_BATCH):
    """Advance groups that lost their head (a crash between a head
    leaving and the advance). Checks up to ``batch`` groups after
    ``cursor``; returns where to resume, None once the queue is done.

    A group is healthy when its lowest member is its live head: one
    index probe. Otherwise :func:`advance` decides (it leaves a group
    with a live head, or one a move holds, as it is).
    """
    after = cursor
    for _ in range(batch):
        query = queries.next_group(queue, project, after)
        found = driver.messages.find(
            query.filter, {f.GROUP: True, f.HEAD: True, f.EXPIRES: True},
            query.sort, 1, query.index)
        if not found:
            return None
        first = found[0]
        after = first[f.GROUP]
        if f.HEAD not in first or first[f.EXPIRES] <= now:
            advance(driver, queue, project, after, now)
    return after
