"""Moving a message group to another queue (same project), in order.

Redis moves a group in one script; MongoDB has no multi-document atomic
step short of transactions, so a move is a small two-phase protocol whose
decision lives in one document of ``moves``: ``{_id: move id, p, q
source, g group, t target, st, v started}`` with ``st`` ``f`` (freezing),
``c`` (committed) or ``a`` (aborted). Steps:

1. **register** the move (``st: f``);
2. **freeze** the head (``r|d -> m``, refused if it is claimed: then
   nothing has changed but the register, and the caller gets
   GroupInFlight), then every other member (``b -> m``) up to the
   group's last one when the freeze began, FREEZE_BATCH members read and
   frozen at a time, each frozen message recording the move id ``mi``,
   its target position ``mk`` (reserved from the target's counter per
   page, in position order), its page's reserved range ``mr`` and
   ``mv``; a member frozen by another move (an aborted one whose mover
   went on) refuses the freeze as a claimed head does.
   A frozen group is unclaimable, and no advance can promote a frozen
   member: the head keeps ``h`` until it lands, and after that the
   group's lowest member is ``m``, which advance never promotes;
3. **commit** (``st: f -> c``, conditional);
4. **land** each frozen message, in position order, with one update
   (``q`` target, ``k`` = ``mk``, remaining ttl and delay, ``b`` if the
   target groups it, else ``r``/``d``), then advance the target's groups
   and the source's group, and forget the move.

Each message is in exactly one queue at every instant, so nothing is lost
or duplicated whatever stops where. Landing in position order keeps what
has landed a prefix of the group, so an advance of the target group at
any moment promotes the right head. A move stopped before its commit is
aborted (``st: f -> a``) and its frozen messages are unfrozen where they
are; one stopped after is landed. Whoever flips ``st`` first decides, and
everyone who finishes a move (its mover, or ``gc()`` for moves older than
``MOVE_TIMEOUT``) follows that decision, so two finishers cannot disagree.
"""

import json
import uuid

import pymongo
from pymongo import errors as mongo_errors

from zaqar_delay import errors
from zaqar_delay import rules
from zaqar_delay.drivers.mongodb import connection
from zaqar_delay.drivers.mongodb import fields as f
from zaqar_delay.drivers.mongodb import groups
from zaqar_delay.drivers.mongodb import queries
from zaqar_delay.drivers.mongodb import reservations
from zaqar_delay.drivers.mongodb import state

# A move not committed this long after it started is aborted by gc().
MOVE_TIMEOUT_MS = 600 * 1000
# Frozen messages read and landed at a time: what one move holds in
# memory, whatever the size of the group.
LAND_BATCH = 100
# Members of the group read and frozen at a time, for the same reason.
FREEZE_BATCH = 100
# Appended to the move id: the token of the reservation of the page
# being frozen, after the first (no ``.`` or ``$``: reservations.py).
PAGE_TOKEN = '-page'
# Tries when the head leaves between reading and freezing it.
FREEZE_ATTEMPTS = 3
FREEZING, COMMITTED, ABORTED = 'f', 'c', 'a'
MOVE_FIELDS = {f.MOVE_ID: '', f.MOVE_POSITION: '', f.MOVE_STARTED: '',
               f.MOVE_RANGE: ''}


def move(driver, queue, project, group, target, target_policy):
    """Move ``group`` to the tail of ``target``; how many messages moved.
    Raises GroupInFlight while the group's head is claimed (or another
    move holds the group); nothing moves then."""
    now = driver.now()
    state.settle(driver, queue, project, now)
    for _ in range(FREEZE_ATTEMPTS):
        head = groups.advance(driver, queue, project, group, now)
        if head is None:
            return 0
        if head[f.STATE] == f.MOVING:
            return _finish_committed(driver, queue, project, group, target,
                                     head, now, target_policy)
        if head[f.STATE] == f.CLAIMED:
            break
        move_id = str(uuid.uuid4())
        driver.moves.insert_one(f.queue_filter(queue, project, **{
            '_id': move_id, f.GROUP: group, 't': target, 'st': FREEZING,
            'v': now}))
        frozen = _freeze(driver, queue, project, group, target, move_id,
                         head, now)
        decided = _decide(driver, move_id,
                          COMMITTED if frozen else ABORTED)
        moved = _finish(driver, queue, project, move_id, now, target_policy,
                        decided)
        if decided == COMMITTED:
            return moved
        if frozen:
            break               # gc aborted this (too slow) move
    raise errors.GroupInFlight(group=group, queue=queue)


def _finish_committed(driver, queue, project, group, target, head, now,
                      target_policy):
    """The group is frozen by a move. One already committed to this
    target is this very call's, retried after a lost reply (a landing's:
    the rest of the group stays frozen, invisible in both queues, until
    gc's MOVE_TIMEOUT otherwise): finish it, and return how many landed
    now. Another move holds the group: GroupInFlight."""
    held_by = driver.moves.find_one({'_id': head.get(f.MOVE_ID)})
    if (held_by is None or held_by.get('st') != COMMITTED
            or held_by.get('t') != target):
        raise errors.GroupInFlight(group=group, queue=queue)
    return _finish(driver, queue, project, held_by['_id'], now,
                   target_policy, COMMITTED)


def _freeze(driver, queue, project, group, target, move_id, head, now):
    """Step 2. False if the head was claimed (or left) meanwhile, a
    member is frozen by another move, or the move was decided (aborted
    by gc) while it froze.

    The group is read FREEZE_BATCH members at a time in position order,
    up to its last member when the freeze started (members posted later
    stay, as on Redis and Swift), and each page is frozen before the
    next is read.
    """
    members = queries.group_members(queue, project, group)
    last = driver.messages.find(members.filter, {f.POSITION: True},
                                [(f.POSITION, -1)], 1, members.index)
    if not last:
        return False            # the group left meanwhile
    bounds = {'$lte': last[0][f.POSITION]}
    where = dict(members.filter, **{f.POSITION: bounds})
    projection = {f.STATE: True, f.POSITION: True, f.EXPIRES: True}
    token = move_id
    while True:
        page = driver.messages.find(where, projection, members.sort,
                                    FREEZE_BATCH, members.index)
        if not _freeze_page(driver, queue, project, group, target, move_id,
                            token, head, page, now):
            return False
        if len(page) < FREEZE_BATCH:
            return True
        bounds['$gt'] = page[-1][f.POSITION]
        # Later pages reserve under a second token, each taking over the
        # last one's entry, whose positions its frozen members now record
        # (``mr``); the first page's entry stays, holding the target's
        # horizon below all of them until the move is finished.
        token, head = move_id + PAGE_TOKEN, None
        if driver.moves.find_one({'_id': move_id, 'st': FREEZING},
                                 {'_id': True}) is None:
            return False        # gc decided the move: freeze no more


def _freeze_page(driver, queue, project, group, target, move_id, token,
                 head, page, now):
    """Freeze one page of the group (``head``, None after the first page,
    with it); whether every member to move in it was frozen.

    Its target positions are reserved first (under ``token``; those left
    unused are given up when the move is finished), so every message is
    frozen together with its ``mk`` in one update.
    """
    live = [doc for doc in page if doc[f.EXPIRES] > now]
    if any(doc[f.STATE] == f.MOVING for doc in live):
        # Frozen by another move: one gc aborted while its mover went on
        # freezing (it unfreezes them when it finishes). Moving the rest
        # would split the group.
        return False
    head_id = head and head['_id']
    docs = [doc for doc in live
            if doc[f.STATE] in (f.BLOCKED, f.WAITING)
            or doc['_id'] == head_id]
    if head and head_id not in {doc['_id'] for doc in docs}:
        return False            # the head left meanwhile
    if not docs:
        return True
    # Recorded under the move's tokens until the move is finished
    # (reservations.py): the target's persistent readers wait for it.
    first, _ = reservations.reserve(driver, target, project, len(docs), now,
                                    token=token, hold_ms=hold_ms(driver))
    position = {doc['_id']: first + rank for rank, doc in enumerate(docs)}
    frozen = {f.STATE: f.MOVING, f.MOVE_ID: move_id, f.MOVE_STARTED: now,
              f.MOVE_RANGE: [first, len(docs)]}

    def freezing(doc, **where):
        return (f.queue_filter(queue, project, _id=doc['_id'], **where),
                {'$set': dict(frozen, **{
                    f.MOVE_POSITION: position[doc['_id']]})})

    # The head alone first, so a claimed head refuses the move before
    # anything else is frozen.
    heads = [doc for doc in docs if doc['_id'] == head_id]
    if heads and not driver.messages.update_one(*freezing(
            heads[0], **{f.HEAD: group,
                         f.STATE: {'$in': [f.READY, f.DELAYED]}})
    ).matched_count:
        return False
    # The others in one request (each has its own target position): a
    # page costs a round trip, not one per member. One that is neither
    # blocked nor waiting any more was frozen by another move meanwhile
    # (or left): the move is given up, as above, and whatever this
    # request froze is unfrozen with the rest (_unfreeze).
    others = [pymongo.UpdateOne(*freezing(
        doc, **{f.GROUP: group, f.STATE: {'$in': [f.BLOCKED, f.WAITING]}}))
        for doc in docs if doc['_id'] != head_id]
    return not others or driver.messages.bulk_write(
        others, ordered=False).matched_count == len(others)


def hold_ms(driver):
    """How long a move's reservations hold the target's persistent
    readers back: until gc has finished a move whose mover died
    (MOVE_TIMEOUT), with a post's margin beside."""
    return MOVE_TIMEOUT_MS + reservations.timeout_ms(driver)


def _decide(driver, move_id, wanted):
    """Flip a freezing move to ``wanted``; returns the decision that
    stands (None if the move is unknown: it was finished)."""
    driver.moves.update_one({'_id': move_id, 'st': FREEZING},
                            {'$set': {'st': wanted}})
    found = driver.moves.find_one({'_id': move_id}, {'st': True})
    return found['st'] if found else None


def _finish(driver, queue, project, move_id, now, target_policy=None,
            decided=None):
    """Land (committed) or unfreeze (otherwise) what the move froze in
    ``queue``; then forget it. Returns how many landed."""
    move_doc = driver.moves.find_one({'_id': move_id}) or {}
    decided = decided or move_doc.get('st')
    group = move_doc.get(f.GROUP)
    committed = decided == COMMITTED
    if committed and target_policy is None:
        target_policy = _policy(driver, move_doc['t'], project)
    target = move_doc.get('t')
    landed, moved_groups, floor, page = 0, {group}, [None], None
    for docs in _frozen_pages(driver, queue, project, move_id, committed):
        moved_groups.update(groups.groups_of(docs))
        if committed:
            landed += _land(driver, queue, project, docs, target,
                            target_policy, now, floor)
        page = _give_up_pages_before(driver, target, project, docs, page)
    if not committed:
        _unfreeze(driver, queue, project, move_id, now)
    groups.advance_all(driver, queue, project, list(moved_groups), now)
    if move_doc:
        # What did not land (aborted, left or expired meanwhile) is
        # given up in the target: no consumer there counts it as lost.
        _give_up_page(driver, target, project, page)
        for token in (move_id, move_id + PAGE_TOKEN):
            reservations.give_back_token(driver, target, project, token)
    driver.moves.delete_one({'_id': move_id})
    return landed


def _frozen_pages(driver, queue, project, move_id, whole):
    """The messages the move froze, LAND_BATCH at a time in position
    order: ``whole`` documents, else only their groups."""
    frozen = queries.of_move(queue, project, move_id)
    where = dict(frozen.filter)
    projection = None if whole else {f.GROUP: True, f.POSITION: True,
                                     f.MOVE_RANGE: True}
    while True:
        docs = driver.messages.find(where, projection, frozen.sort,
                                    LAND_BATCH, frozen.index)
        yield docs
        if len(docs) < LAND_BATCH:
            return
        where[f.POSITION] = {'$gt': docs[-1][f.POSITION]}


def _give_up_pages_before(driver, target, project, docs, page):
    """Give up what the freeze pages of ``docs`` (``mr``) before the last
    one left empty in ``target``: ``docs`` come in position order, each
    page's members one after another, so every member of those pages is
    finished. Returns that last page (``page``, the one still pending
    before ``docs``, if they name none)."""
    for doc in docs:
        frozen_with = doc.get(f.MOVE_RANGE)
        if frozen_with is not None and frozen_with != page:
            _give_up_page(driver, target, project, page)
            page = frozen_with
    return page


def _give_up_page(driver, target, project, page):
    """A page's positions (``[first, count]``) that hold no message in
    ``target`` (unknown once the move is forgotten) recorded as given
    up. Pages after the first keep no reservation entry of their own."""
    if page is not None and target is not None:
        reservations.give_up_empty(driver, target, project, *page)


def _land(driver, queue, project, docs, target, policy, now, floor=None):
    """Step 4: each frozen message to ``target``, in position order.

    A message whose reserved position is taken (the target was deleted
    and created again meanwhile, its counter starting afresh) lands at a
    new one, and so does every later one at or below the last position
    landed (``floor``, [position or None], kept from page to page), so
    the group keeps its order. Those landing at their reserved positions
    go in one ordered bulk write, which stops at a taken one."""
    landed, target_groups = 0, []
    floor = [None] if floor is None else floor
    try:
        landings = []
        for doc in docs:
            where = f.queue_filter(queue, project, **{
                '_id': doc['_id'], f.STATE: f.MOVING,
                f.MOVE_ID: doc[f.MOVE_ID]})
            if doc[f.EXPIRES] <= now:
                driver.messages.delete_one(dict(where, **{
                    f.EXPIRES: {'$lte': now}}))
                continue            # expired meanwhile: nothing to carry
            group, change = _landing(doc, target, policy, now)
            # Counted before its update: the reply may be lost after it
            # landed the message, and its group must advance there then.
            # (One that did not land is advanced for nothing: harmless.)
            target_groups.append(group)
            landings.append((where, change))
        while landings:
            at_reserved = _reserved_run(landings, floor[0])
            done, matched = _land_run(driver, at_reserved)
            landed += matched
            if done:
                floor[0] = max(floor[0] or 0,
                               at_reserved[done - 1][1]['$set'][f.POSITION])
            landings = landings[done:]
            if landings:
                # Its position is taken (or at or below one a message
                # took at the tail): at the tail, and so is every later
                # one of the group.
                where, change = landings.pop(0)
                if _land_at_tail(driver, target, project, where, change,
                                 now):
                    landed += 1
                    floor[0] = max(floor[0] or 0,
                                   change['$set'][f.POSITION])
    finally:
        groups.advance_all(driver, target, project, target_groups, now)
    return landed


def _reserved_run(landings, floor):
    """The landings from the first that can go to their reserved
    positions (above ``floor``) in one request."""
    run = []
    for where, change in landings:
        if floor is not None and change['$set'][f.POSITION] <= floor:
            break
        run.append((where, change))
    return run


def _land_run(driver, run):
    """Land ``run`` at their reserved positions in one ordered bulk
    write: (how many were written before one met a taken position, how
    many of those matched a frozen message)."""
    if not run:
        return 0, 0
    try:
        return len(run), driver.messages.bulk_write(
            [pymongo.UpdateOne(where, change) for where, change in run],
            ordered=True).matched_count
    except mongo_errors.BulkWriteError as refused:
        if not connection.refused_as_duplicates(refused):
            raise errors.BackendUnavailable(backend='MongoDB',
                                            reason=refused)
        details = refused.details
        return details['writeErrors'][0]['index'], details['nMatched']


def _landing(doc, target, policy, now):
    """(its group there, the update) that lands frozen ``doc`` in
    ``target`` at its reserved position."""
    ttl = -(-(doc[f.EXPIRES] - now) // 1000)
    delay = max(0, -(-(doc[f.DUE] - now) // 1000))
    group = rules.group_or_none(json.loads(doc[f.BODY]), policy)
    changes = {f.QUEUE: target, f.POSITION: doc[f.MOVE_POSITION],
               f.CREATED: now, f.TTL: ttl, f.EXPIRES: now + ttl * 1000,
               f.DUE: now + delay * 1000, f.CLAIM_COUNT: 0,
               f.STATE: (f.WAITING if group is not None and delay
                         else f.BLOCKED if group is not None
                         else f.DELAYED if delay else f.READY)}
    removed = dict(MOVE_FIELDS, **{f.HEAD: '', f.CLAIM: '', f.PIN: '',
                                   f.CLAIM_EXPIRES: '', f.REDELIVERY: ''})
    if group is None:
        removed[f.GROUP] = ''
    else:
        changes[f.GROUP] = group
    return group, {'$set': changes, '$unset': removed}


def _land_at_tail(driver, target, project, where, change, now):
    """Land one message with ``change`` at a new position of the
    target's tail (reserved until it is filled, as a post's); whether it
    was still frozen."""
    position, token = reservations.reserve(driver, target, project, 1, now)
    change['$set'][f.POSITION] = position
    # No answer (a lost reply raises): the reservation goes stale, as a
    # post's does, for the update may still apply.
    matched = driver.messages.update_one(where, change).matched_count
    reservations.release(driver, target, project, token,
                         unused=() if matched else [position])
    return matched


def _unfreeze(driver, queue, project, move_id, now):
    """Abort: the frozen head back to ready/delayed, the rest blocked."""
    frozen = queries.of_move(queue, project, move_id).filter
    head = dict(frozen, **{f.HEAD: {'$exists': True}})
    driver.messages.update_many(dict(head, **{f.DUE: {'$lte': now}}), {
        '$set': {f.STATE: f.READY}, '$unset': MOVE_FIELDS})
    driver.messages.update_many(dict(head, **{f.DUE: {'$gt': now}}), {
        '$set': {f.STATE: f.DELAYED}, '$unset': MOVE_FIELDS})
    driver.messages.update_many(dict(frozen, **{f.DUE: {'$lte': now}}), {
        '$set': {f.STATE: f.BLOCKED}, '$unset': MOVE_FIELDS})
    driver.messages.update_many(frozen, {
        '$set': {f.STATE: f.WAITING}, '$unset': MOVE_FIELDS})


def _policy(driver, target, project):
    """A committed move lands even if its target was deleted since (the
    queue is created again) or its metadata went bad: messages must never
    be stranded."""
    return driver.message_controller.target_policy(target, project)


def finish_stale(driver, queue, project, now):
    """gc(): finish moves from ``queue`` older than MOVE_TIMEOUT (abort
    those not committed), and unfreeze messages whose move is gone (a
    mover that froze more after its move was aborted). How many."""
    before = now - MOVE_TIMEOUT_MS
    query = queries.moves_started(queue, project, before)
    stale = [doc['_id'] for doc in driver.moves.find(
        query.filter, {'_id': True}, hint=query.index)]
    # Frozen messages whose move has no document any more, LAND_BATCH
    # per pass (a frozen group may be large): the moves above, finished
    # now, no longer hold the front of this range on the next pass.
    query = queries.stale_moves(queue, project, before)
    stale += [doc[f.MOVE_ID] for doc in driver.messages.find(
        query.filter, {f.MOVE_ID: True}, query.sort, LAND_BATCH,
        hint=query.index)]
    stale = list(dict.fromkeys(stale))
    for move_id in stale:
        decided = _decide(driver, move_id, ABORTED)
        _finish(driver, queue, project, move_id, now, decided=decided)
    return len(stale)
