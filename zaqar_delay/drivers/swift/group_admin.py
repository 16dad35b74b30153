"""Managing message groups on Swift: list, purge, move (layout: names.py,
head rule: groups.py).

Swift has no multi-object transaction, so purge and move are not atomic:
members posted while they run are left in the queue (and become the group's
new head). A move locks the head first (``l/<id>/<attempt>`` with
``c=move``), so no claim can take it meanwhile, then copies the group
into the target with the same ids (a repeated copy is skipped) a page of
MOVE_BATCH members at a time, deleting each page here once it is copied,
head last; gc finishes a move whose node died midway.
"""

import json
import math

from zaqar.storage import errors as storage_errors

from zaqar_delay import errors
from zaqar_delay import retention as retention_rules
from zaqar_delay import rules
from zaqar_delay.drivers.swift import groups
from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import pins
from zaqar_delay.drivers.swift import retention as swift_retention

# g/ entries read per listing request while collecting a page of groups.
PAGE = 1000
# Members a move reads, copies and deletes at a time: what one move holds
# in memory, whatever the size of the group.
MOVE_BATCH = 100


def list_groups(qs, now, marker, limit, retention=retention_rules.NONE):
    """Up to ``limit`` groups after the encoded id ``marker``, in the order
    of their keys (= of their encoded ids): id, depth, head, in flight;
    of the messages ``retention`` keeps."""
    qs.settle(now)
    pins.sweep(qs, now)
    positions, locks, hints, pinned, activities = qs.store.parallel(
        lambda args: qs.store.listing_all(qs.c, *args),
        [('p/',), ('l/',), ('x/', 'x/' + names.ms(now) + '0'), ('P/',),
         ('C/',)])
    clients = pins.clients_of(qs, pinned, activities, now)
    live_claims = {names.parse_expiry(e['name'])[1] for e in hints}
    holder = {}
    for entry in locks:
        message_id, attempt = names.parse_lock(entry['name'])
        if attempt > holder.get(message_id, (0, None))[0]:
            holder[message_id] = (attempt, names.ct_params(
                entry.get('content_type')).get('c'))
    claimed = {mid for mid, (_, c) in holder.items() if c in live_claims}
    keep = swift_retention.horizon_of(qs, reversed(positions), retention,
                                      now, claimed)
    live = set()
    for entry in positions:
        fields = names.position_fields(entry)
        if fields is not None and fields['e'] > now and (
                fields['id'] in claimed
                or keep.keeps(fields['pos'], fields['cr'])):
            live.add(fields['id'])
    found = {}
    after = None if marker is None else names.after_group(
        names.group_key(marker))
    while len(found) <= limit:
        page = qs.store.listing(qs.c, 'g/', marker=after, limit=PAGE)
        for entry in page:
            gk, _, message_id = names.parse_group_entry(entry['name'])
            if message_id not in live:
                continue
            group = found.get(gk)
            if group is None:
                group = found[gk] = {
                    'id': json.loads(names.ct_params(
                        entry.get('content_type'))['g']),
                    'depth': 0, 'head': message_id,
                    'in_flight': holder.get(message_id, (0, None))[1]
                    in live_claims,
                    'client': clients.get(gk)}
            group['depth'] += 1
        if len(page) < PAGE:
            break
        after = page[-1]['name']
    return list(found.values())[:limit]


def live_members(qs, gk, now, after=None, end=None, reverse=False):
    """The live messages of one listing page of MOVE_BATCH entries of the
    group after the entry name ``after`` and before ``end`` (``reverse``:
    from the tail), in the page's order (gone entries are dropped); and
    the name of the page's last entry (None when the page was not full)."""
    page = qs.store.listing(qs.c, names.group_prefix(gk), marker=after,
                            end_marker=end, limit=MOVE_BATCH,
                            reverse=reverse)
    entries = [names.parse_group_entry(e['name'])[1:] for e in page]
    read = qs.store.parallel(lambda e: qs.lookup(e[1], now), entries)
    ghosts = [(mid, pos, None, gk)
              for (pos, mid), (message, missing) in zip(entries, read)
              if missing]
    if ghosts:
        qs.finish_removal(ghosts, now)
    last = page[-1]['name'] if len(page) == MOVE_BATCH else None
    return [message for message, _ in read if message is not None], last


def purge(qs, now, group):
    """Delete every message of the group, MOVE_BATCH at a time from its
    tail (so no member is filed as a head meanwhile, and members posted
    once it started stay); returns how many there were."""
    gk = names.group_key(group)
    purged, after = 0, None
    while True:
        victims, after = live_members(qs, gk, now, after, reverse=True)
        qs.remove([(m.id, m.pos, None, gk) for m in victims], now)
        purged += len(victims)
        if after is None:
            return purged


def move(driver, queue, project, group, target):
    """Move the group to ``target``, head locked first; see the module
    docstring. Raises GroupInFlight if its head is taken."""
    now = driver.now_ms()
    qs = driver.queue_state(queue, project)
    qs.settle(now)
    gk = names.group_key(group)
    # Members posted from now on stay here (the group's new head).
    tail = qs.store.listing(qs.c, names.group_prefix(gk), limit=1,
                            reverse=True)
    if not tail:
        return 0
    last = names.parse_group_entry(tail[0]['name'])[1]
    end = _end_marker(gk, last)
    members, after = live_members(qs, gk, now, end=end)
    while not members and after is not None:
        members, after = live_members(qs, gk, now, after, end)
    if not members:
        return 0
    policy = driver.message_controller.policy(target, project)
    head = members[0]
    attempts, busy = qs.busy(head.id, now)
    lock = (names.lock_obj(head.id, attempts + 1),
            dict(c=names.MOVE, t=target, z=last))
    if busy or not qs.store.create(
            qs.c, lock[0], content_type=names.content_type(**lock[1])):
        raise errors.GroupInFlight(group=group, queue=queue)
    return transfer(driver, qs, project, head, target, policy, now, lock,
                    (members, after))


def _end_marker(gk, last):
    """The listing end marker past the group's entry at position
    ``last`` (the move's last member), before any later one."""
    return names.group_prefix(gk) + names.pos(last) + '/~'


def transfer(driver, qs, project, head, target, policy, now, lock,
             first=None):
    """Copy the group of ``head``, locked by ``lock`` (name, parameters),
    to ``target`` with remaining ttl and delay, in order, MOVE_BATCH
    members at a time (``first``: the first page, as live_members gave
    it), up to the member the lock names (``z``), deleting each page here
    once it is copied and the head last. Returns how many moved. The
    copies keep their ids, so a page copied again after a crash is
    skipped in the target.

    The lock is renewed before each page, so gc takes over only a move
    that made no progress for GC_ABANDONED_S; one found gone (gc
    finished the move) ends this one."""
    last = lock[1].get('z')
    # A lock of an earlier release names no last member: up to the end.
    end = None if last is None else _end_marker(head.gk, int(last))
    moved = 0
    page, after = first or live_members(qs, head.gk, now, end=end)
    batch = [head] + [m for m in page if m.id != head.id]
    while True:
        if not _renew(driver, qs, lock):
            return moved
        _copy(driver, project, batch, target, policy, now)
        # The markers first: dying in between must not leave one that
        # would skip these messages were they moved back.
        qs.moved_out([m.id for m in batch])
        qs.remove([(m.id, m.pos, None, m.gk) for m in batch
                   if m.id != head.id], now)
        moved += len(batch)
        if after is None:
            break
        page, after = live_members(qs, head.gk, now, after, end)
        batch = [m for m in page if m.id != head.id]
    qs.remove([(head.id, head.pos, None, head.gk)], now)
    return moved


def _renew(driver, qs, lock):
    """Mark the move's lock as renewed now (``r``, ms); False if it is
    gone. A POST never creates, so a move gc finished is not locked
    again."""
    name, params = lock
    return qs.store.post(qs.c, name, {'Content-Type': names.content_type(
        **dict(params, r=driver.now_ms()))})


def _copy(driver, project, members, target, policy, now):
    """Insert ``members`` into ``target``: one insert per run of one
    poster's messages, so positions keep their order."""
    runs = []
    for message in members:
        body_json = json.dumps(message.body, ensure_ascii=False,
                               separators=(',', ':'))
        moved = rules.NewMessage(
            id=message.id, ttl=max(1, math.ceil((message.expires - now)
                                               / 1000)),
            delay=max(0, math.ceil((message.due - now) / 1000)),
            body=message.body, body_json=body_json,
            group=rules.group_or_none(message.body, policy))
        if runs and runs[-1][0] == message.client:
            runs[-1][1].append(moved)
        else:
            runs.append((message.client, [moved]))
    for client_uuid, batch in runs:
        driver.message_controller._insert(target, project, batch,
                                          client_uuid, copies=True)


def finish_move(driver, qs, project, head, lock, now):
    """gc: finish a move whose node died (or stalled) after locking
    ``head`` with ``lock`` (name, parameters)."""
    target = lock[1].get('t')
    try:
        metadata = driver.message_controller.queue_metadata(target, project)
    except storage_errors.QueueDoesNotExist:
        # Nowhere to go: give the head back to its group, due when it
        # was (a move takes a delayed group too). Then its filings of the
        # attempts locked go: the move's lock left a delayed head's; due
        # with the new one, it would stand for the group in a claim.
        attempts = qs.latest_lock(head.id)[0]
        qs.make_available(head.pos, head.id, attempts + 1,
                          max(head.due, now), now, head.gk, head.client,
                          head.expires)
        qs.store.delete_many(qs.c, [name for k in range(1, attempts + 1)
                                    for name in (
            names.avail_obj(head.pos, head.id, k),
            names.delayed_obj(head.due, head.pos, head.id, k))])
        return
    # The move was accepted: metadata of the target's that went bad since
    # takes the group ungrouped rather than stranding it here.
    policy = rules.QueuePolicy.for_arrivals(metadata)
    transfer(driver, qs, project, head, target, policy, now, lock)
