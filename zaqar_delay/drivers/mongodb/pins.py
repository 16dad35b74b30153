"""Sticky groups on MongoDB (docs/usage.md, "Sticky consumers").

On a queue with ``_message_group_sticky``, a group whose message a client
claimed (or popped) is pinned to it: a ``pins`` document ``{p, q, g, cl,
t}`` (at most one per group), and ``pn`` = the client on the group's head,
set when the head is handed out and whenever a new head is promoted
(groups.py reads the pin). A claim by client C reads the ready messages
whose ``pn`` is null or C, two ranges of the partial index
``zd_ready_pin`` ``{p, q, pn, k}`` merged by position: heads pinned to
other clients lie outside both, so they cost a claim nothing.

A client is active while ``sticky_clients`` says so: a claim records it
(``u`` = now + sticky time), and its renewals and deletes push ``u`` on.
Once ``u`` has passed, its groups are freed in bounded batches, by claims,
stats and gc (:func:`free_idle`): a batch of its pins is deleted, then
``pn`` is taken off the heads of exactly the groups whose pin went, and a
client left without pins is forgotten.

Pins made after a sweep read a client (its claim raised ``a`` first,
then pinned with ``t`` = that time) are never deleted by that sweep (it
deletes only ``t <= a`` as read), and the client document goes only if
``a`` is still what the sweep read. A promotion that copied a pin which
went meanwhile takes ``pn`` off again (:func:`head_pin`).
"""

from pymongo import errors as mongo_errors

from zaqar_delay.drivers.mongodb import fields as f
from zaqar_delay.drivers.mongodb import queries

# Groups freed per sweep (one idle client's), per claim, stats or gc.
FREE_BATCH = 100


def activate(driver, queue, project, client, sticky_s, now):
    """A claim by ``client`` on a sticky queue: active for ``sticky_s``."""
    sticky_ms = sticky_s * 1000
    where = queries.sticky_client(queue, project, client).filter
    update = {'$max': {f.ACTIVE_AT: now, f.ACTIVE_UNTIL: now + sticky_ms},
              '$set': {f.STICKY_MS: sticky_ms}}
    try:
        driver.sticky_clients.update_one(where, update, upsert=True)
    except mongo_errors.DuplicateKeyError:
        # Another claim by the same client inserted it meanwhile.
        driver.sticky_clients.update_one(where, update)


def touch(driver, queue, project, client, now):
    """A renewal or delete by ``client``: still active, if it is tracked
    (it claimed on a sticky queue). One index probe otherwise."""
    if client is None:
        return
    where = queries.sticky_client(queue, project, client).filter
    found = driver.sticky_clients.find_one(where, {f.STICKY_MS: True})
    if found is not None:
        driver.sticky_clients.update_one({'_id': found['_id']}, {'$max': {
            f.ACTIVE_AT: now, f.ACTIVE_UNTIL: now + found[f.STICKY_MS]}})


def pin(driver, queue, project, client, claim_id, docs, now):
    """Pin the groups of ``docs`` (just handed out under ``claim_id``) to
    ``client``: the pins first, then ``pn`` on the heads."""
    grouped = [doc for doc in docs if f.GROUP in doc]
    for doc in grouped:
        where = f.queue_filter(queue, project, **{f.GROUP: doc[f.GROUP]})
        update = {'$set': {f.PIN_CLIENT: client, f.PINNED_AT: now}}
        try:
            driver.pins.update_one(where, update, upsert=True)
        except mongo_errors.DuplicateKeyError:
            driver.pins.update_one(where, update)
    if not grouped:
        return
    held = {'_id': {'$in': [doc['_id'] for doc in grouped]},
            f.CLAIM: claim_id, f.STATE: f.CLAIMED}
    marked = driver.messages.update_many(held, {'$set': {f.PIN: client}})
    if marked.matched_count < len(grouped):
        _drop_pins_of_lost(driver, queue, project, client, grouped, held,
                           now)


def _drop_pins_of_lost(driver, queue, project, client, grouped, held, now):
    """Messages the claim no longer holds (the queue was deleted since
    it took them, and its pins with it; or they were purged or moved)
    keep no pin it wrote: written after the deletion, a pin would have
    no client document, which no idle sweep frees, and the group would
    stay this client's in the queue created again. A pin rewritten
    since by another claim (``cl`` or ``t`` differ) stays."""
    still = {doc['_id'] for doc in driver.messages.find(held, {'_id': True})}
    lost = [doc[f.GROUP] for doc in grouped if doc['_id'] not in still]
    driver.pins.delete_many(f.queue_filter(queue, project, **{
        f.GROUP: {'$in': lost}, f.PIN_CLIENT: client, f.PINNED_AT: now}))


def head_pin(driver, queue, project, group):
    """The client ``group`` is pinned to, or None (a promotion copies it
    onto the new head)."""
    found = driver.pins.find_one(
        queries.pin_of(queue, project, [group]).filter, {f.PIN_CLIENT: True})
    return None if found is None else found[f.PIN_CLIENT]


def recheck_head(driver, queue, project, group, head_id, copied):
    """After a promotion copied pin ``copied`` onto ``head_id``: a pin
    freed meanwhile comes off the head too (the sweep may have looked at
    the heads before this one was promoted)."""
    now_pinned = head_pin(driver, queue, project, group)
    if now_pinned == copied:
        return
    change = ({'$unset': {f.PIN: ''}} if now_pinned is None
              else {'$set': {f.PIN: now_pinned}})
    driver.messages.update_one({'_id': head_id, f.PIN: copied}, change)


def unpin(driver, queue, project, group):
    """Free one group (operator); the client it was pinned to, or None."""
    found = driver.pins.find_one_and_delete(
        queries.pin_of(queue, project, [group]).filter,
        projection={f.PIN_CLIENT: True})
    if found is not None:
        _unpin_heads(driver, queue, project, [group], found[f.PIN_CLIENT])
        return found[f.PIN_CLIENT]
    # No pin: maybe this is the retry of an unpin cut short after its
    # pin went, whose head still names the client (and nothing else
    # would ever take that off). Any pin on a head but the group's
    # current one (none, or one taken since) is such a leftover.
    current = head_pin(driver, queue, project, group)
    _unpin_heads(driver, queue, project, [group],
                 {'$exists': True} if current is None
                 else {'$exists': True, '$ne': current})
    # A claim pinning the group meanwhile writes its pin, then the head's:
    # one taken off by the update above goes back (as recheck_head).
    pinned = head_pin(driver, queue, project, group)
    if pinned is not None and pinned != current:
        heads = queries.pinned_heads(queue, project, [group],
                                     {'$exists': False})
        driver.messages.update_many(heads.filter, {'$set': {f.PIN: pinned}})
    return None


def unpin_groups(driver, queue, project, groups):
    """Free some groups whoever holds them (Zaqar's purge pops them)."""
    groups = [group for group in dict.fromkeys(groups) if group is not None]
    if not groups:
        return
    where = queries.pin_of(queue, project, groups).filter
    driver.pins.delete_many(where)
    driver.messages.update_many(
        f.queue_filter(queue, project, **{
            f.HEAD: {'$in': groups, '$exists': True},
            f.PIN: {'$exists': True}}),
        {'$unset': {f.PIN: ''}})


def _unpin_heads(driver, queue, project, groups, client):
    """Take the pin off the heads of ``groups`` whose pin matches
    ``client`` (a client, or a condition on it)."""
    heads = queries.pinned_heads(queue, project, groups, client)
    driver.messages.update_many(heads.filter, {'$unset': {f.PIN: ''}})


def free_idle(driver, queue, project, now, idle_only=True):
    """Free up to FREE_BATCH groups of the client whose activity ended
    first (of any client when ``idle_only`` is False: the queue is no
    longer sticky); forget a client left with none. True when it found a
    client to work on."""
    query = queries.sticky_clients(queue, project,
                                   now if idle_only else None)
    found = driver.sticky_clients.find(query.filter, None, query.sort, 1,
                                       query.index)
    if not found:
        return False
    client = found[0]
    name, active_at = client[f.PIN_CLIENT], client[f.ACTIVE_AT]
    mine = queries.pins_of(queue, project, name, active_at)
    pinned = _pins_to_free(driver, queue, project, name, mine, now)
    if not pinned:
        # Only if not active again since it was read.
        driver.sticky_clients.delete_one({'_id': client['_id'],
                                          f.ACTIVE_AT: active_at})
        return True
    ids = [doc['_id'] for doc in pinned]
    driver.pins.delete_many(dict(mine.filter, _id={'$in': ids}))
    kept = {doc['_id'] for doc in driver.pins.find(
        {'_id': {'$in': ids}}, {'_id': True})}
    freed = [doc[f.GROUP] for doc in pinned if doc['_id'] not in kept]
    if freed:
        _unpin_heads(driver, queue, project, freed, name)
    return True


def _pins_to_free(driver, queue, project, client, mine, now):
    """Up to FREE_BATCH of ``mine`` (an idle client's pins): first those
    of groups whose heads wait claimable for it, which another client can
    take at once, then the oldest. A pin outlives its group, so a
    long-running client holds one for every group it ever took, and
    oldest first alone would free the groups it worked on last."""
    waiting = queries.waiting_for(queue, project, client, now)
    groups = [doc[f.HEAD] for doc in driver.messages.find(
        waiting.filter, {f.HEAD: True}, waiting.sort, FREE_BATCH,
        waiting.index) if doc.get(f.HEAD) is not None]
    first = driver.pins.find(
        dict(mine.filter, **{f.GROUP: {'$in': groups}}), {f.GROUP: True},
        mine.sort, FREE_BATCH, mine.index) if groups else []
    if len(first) == FREE_BATCH:
        return first
    chosen = {doc['_id'] for doc in first}
    rest = driver.pins.find(mine.filter, {f.GROUP: True}, mine.sort,
                            FREE_BATCH, mine.index)
    return first + [doc for doc in rest
                    if doc['_id'] not in chosen][:FREE_BATCH - len(first)]


def settle(driver, queue, project, policy, now):
    """A claim or pop's sticky step, before it reads: on a sticky queue
    its client becomes active and a batch of idle clients' groups is
    freed. Returns the client whose pinned heads the claim reads besides
    the unpinned ones; None when it reads every head (a queue not
    sticky, Zaqar's purge). A queue that is not sticky sends nothing
    here: its claims read pinned heads like any other, and the pins left
    from when it was sticky go once their clients are idle (no claim
    there keeps a client active), a batch per gc step or stats call."""
    if policy.sticky and policy.client is not None:
        activate(driver, queue, project, policy.client, policy.sticky, now)
        free_idle(driver, queue, project, now)
        return policy.client
    return None


def count(driver, queue, project):
    """How many groups of the queue are pinned."""
    return driver.pins.count_documents(queries.pins(queue, project).filter)


def clients_of(driver, queue, project, groups, now):
    """{group: the live client it is pinned to} for some groups."""
    pinned = {doc[f.GROUP]: doc[f.PIN_CLIENT] for doc in driver.pins.find(
        queries.pin_of(queue, project, groups).filter,
        {f.GROUP: True, f.PIN_CLIENT: True})}
    if not pinned:
        return {}
    live = {doc[f.PIN_CLIENT] for doc in driver.sticky_clients.find(
        f.queue_filter(queue, project, **{
            f.PIN_CLIENT: {'$in': list(set(pinned.values()))},
            f.ACTIVE_UNTIL: {'$gt': now}}), {f.PIN_CLIENT: True})}
    return {group: client for group, client in pinned.items()
            if client in live}


def forget_queue(driver, queue, project):
    """A purged queue keeps no pins and no clients."""
    where = f.queue_filter(queue, project)
    driver.pins.delete_all(where)
    driver.sticky_clients.delete_all(where)
