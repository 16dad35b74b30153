"""The queries on the hot paths, each with the index it is shaped for.

Every function returns a :class:`Query`: collection, filter, sort and the
name of the index (``fields.INDEXES``) whose key prefix the filter's
equality fields, then its sort or range field, follow. ``find`` queries
pass the index as a hint; update and delete queries name it only for the
record (docs/mongodb.md, tests/mongodb/test_indexes.py), the planner
choosing it by the same prefix rule.
"""

import collections

from zaqar_delay.drivers.mongodb import fields as f

Query = collections.namedtuple('Query', 'collection filter sort index')


READY_INDEX = 'zd_state_position'


def ready(queue, project, now, client=None):
    """Claimable messages, oldest position first (claim, pop). For a
    sticky ``client``: the unpinned ones and those pinned to it, never
    those pinned to other clients (pins.py)."""
    query = f.queue_filter(queue, project, **{
        f.STATE: f.READY, f.EXPIRES: {'$gt': now}})
    if client is None:
        return Query(f.MESSAGES, query, [(f.POSITION, 1)], READY_INDEX)
    query[f.PIN] = {'$in': [None, client]}
    return Query(f.MESSAGES, query, [(f.POSITION, 1)], 'zd_ready_pin')


def waiting_for(queue, project, client, now):
    """Claimable heads pinned to a sticky ``client``, oldest first: the
    groups another client could take at once once it is idle."""
    return Query(f.MESSAGES, f.queue_filter(queue, project, **{
        f.STATE: f.READY, f.PIN: client, f.EXPIRES: {'$gt': now}}),
        [(f.POSITION, 1)], 'zd_ready_pin')


def page(queue, project, now, marker, states, client_uuid=None):
    """One listing page after ``marker``, in position order.

    ``states`` is the subset of message states to show (see
    :func:`_show`); all four listed states need no state condition beyond
    leaving out moving messages, and walk the position index.
    """
    query = f.queue_filter(queue, project, **{f.EXPIRES: {'$gt': now}})
    if marker is not None:
        query[f.POSITION] = {'$gt': marker}
    if client_uuid is not None:
        query[f.CLIENT] = {'$ne': client_uuid}
    return Query(f.MESSAGES, query, [(f.POSITION, 1)],
                 _show(query, states, now))


def due_now(queue, project, now, sort):
    """Due messages, claimed or not, blocked group members included:
    first/oldest/newest."""
    query = f.queue_filter(queue, project, **{f.EXPIRES: {'$gt': now}})
    return Query(f.MESSAGES, query, [(f.POSITION, sort)],
                 _show(query, [f.CLAIMED, f.READY, f.BLOCKED], now))


LISTED = {f.READY, f.BLOCKED, f.CLAIMED, f.DELAYED, f.WAITING}


def _show(query, states, now):
    """Add the state condition of a read to ``query``; returns the index.

    Blocked group members are shown as the unclaimed messages they are,
    so, like ready ones, only once due unless delayed ones are wanted
    (their ``d`` is created + delay). Moving messages are in no queue
    until their move lands (as Redis keeps them in an outbox).
    """
    if f.DELAYED in states and f.BLOCKED in states:
        states = list(states) + [f.WAITING]
    states = sorted(states)
    if set(states) == LISTED:
        query[f.STATE] = {'$ne': f.MOVING}
        return 'zd_position'
    query[f.STATE] = states[0] if len(states) == 1 else {'$in': states}
    if f.BLOCKED in states and f.DELAYED not in states:
        # Members not due are ``w``, outside these ranges; this condition
        # only hides ``b`` members an earlier release stored not due.
        others = [state for state in states if state != f.BLOCKED]
        query['$or'] = [{f.STATE: others[0] if len(others) == 1
                         else {'$in': others}},
                        {f.DUE: {'$lte': now}}]
    return 'zd_state_position'


def not_due(doc, now):
    """Whether a listing without delayed messages (``_show`` without
    ``d``) leaves ``doc`` out: delayed and waiting messages, and a
    blocked member an earlier release stored before it was due."""
    found = doc.get(f.STATE)
    return found in (f.DELAYED, f.WAITING) or (
        found == f.BLOCKED and doc.get(f.DUE, 0) > now)


def any_live(queue, project, now, sort):
    """Oldest or newest live message, delayed ones too (stats)."""
    return Query(f.MESSAGES,
                 f.queue_filter(queue, project, **{f.EXPIRES: {'$gt': now}}),
                 [(f.POSITION, sort)], 'zd_position')


def delayed_due(queue, project, now):
    """Delayed messages and waiting group members whose time has come
    (become ready and blocked): two ranges merged by ``d``."""
    return Query(f.MESSAGES,
                 f.queue_filter(queue, project, **{
                     f.STATE: {'$in': [f.DELAYED, f.WAITING]},
                     f.DUE: {'$lte': now}}),
                 [(f.DUE, 1)], 'zd_state_due')


def claimed_due(queue, project, before):
    """Claimed messages due again (claim expiry + redelivery delay)
    before a time: orphans if their claim is gone (gc)."""
    return Query(f.MESSAGES,
                 f.queue_filter(queue, project, **{
                     f.STATE: f.CLAIMED, f.DUE: {'$lte': before}}),
                 [(f.DUE, 1)], 'zd_state_due')


def due_again(queue, project, now):
    """Delayed messages now due, and claimed ones due again (claim
    expiry + redelivery delay): what makes a queue need settling before
    a claim (state.settle_if_due)."""
    return Query(f.MESSAGES,
                 f.queue_filter(queue, project, **{
                     f.STATE: {'$in': [f.CLAIMED, f.DELAYED, f.WAITING]},
                     f.DUE: {'$lte': now}}),
                 None, 'zd_state_due')


def needs_settling(queue, project, now):
    """One probe for anything settling would change that a claim or a
    listing of unclaimed, undelayed messages could see: its branches are
    :func:`due_again` and :func:`expired`, each an index range."""
    return Query(f.MESSAGES, {'$or': [
        due_again(queue, project, now).filter,
        expired(queue, project, now).filter]}, None, None)


def expired(queue, project, now):
    """Messages past their expiry (purged)."""
    return Query(f.MESSAGES,
                 f.queue_filter(queue, project, **{f.EXPIRES: {'$lte': now}}),
                 [(f.EXPIRES, 1)], 'zd_expires')


def live(queue, project, now):
    """Every live message of a queue (stats total)."""
    return Query(f.MESSAGES,
                 f.queue_filter(queue, project, **{f.EXPIRES: {'$gt': now}}),
                 None, 'zd_expires')


def in_state(queue, project, state):
    """Messages of a queue in one state (stats counts)."""
    return Query(f.MESSAGES, f.queue_filter(queue, project, **{
        f.STATE: state}), None, 'zd_state_position')


def grouped(queue, project, state):
    """Grouped messages of a queue in one state (stats)."""
    query = f.queue_filter(queue, project, **{f.GROUP: {'$exists': True}})
    query[f.STATE] = state
    return Query(f.MESSAGES, query, None, 'zd_state_position')


def group_head(queue, project, group):
    """The head of a group: its one member allowed out of ``b``. The
    filter repeats the partial index's ``$exists``, so the planner (and
    the hint) may use ``zd_group_head``."""
    return Query(f.MESSAGES, f.queue_filter(queue, project, **{
        f.HEAD: {'$eq': group, '$exists': True}}), None, 'zd_group_head')


def heads(queue, project):
    """Every group head of a queue: one per group (stats)."""
    return Query(f.MESSAGES, f.queue_filter(queue, project, **{
        f.HEAD: {'$exists': True}}), None, 'zd_group_head')


def group_first(queue, project, group, now):
    """A group's lowest-position live member (its rightful head)."""
    return Query(f.MESSAGES, f.queue_filter(queue, project, **{
        f.GROUP: group, f.EXPIRES: {'$gt': now}}),
        [(f.POSITION, 1)], 'zd_group')


def group_members(queue, project, group):
    """Every member of a group, in position order (depth, purge, move)."""
    return Query(f.MESSAGES, f.queue_filter(queue, project, **{
        f.GROUP: group}), [(f.POSITION, 1)], 'zd_group')


def next_group(queue, project, after):
    """The first member of the first group after ``after``, in group-id
    order: one index probe per group (a skip scan of ``{p, q, g, k}``).
    Encoded group ids are never empty, so ``''`` starts at the first."""
    return Query(f.MESSAGES, f.queue_filter(queue, project, **{
        f.GROUP: {'$gt': after or ''}}),
        [(f.GROUP, 1), (f.POSITION, 1)], 'zd_group')


# States whose messages retention judges; the others (claimed, moving)
# are held: kept, and not counted against ``length``.
KEEPABLE = [f.BLOCKED, f.DELAYED, f.READY, f.WAITING]


def keepable(queue, project, now, created_after=None, sort=-1):
    """Live messages retention judges (kept by time when
    ``created_after`` is given), newest first: the walk that finds the
    length cutoff."""
    query = f.queue_filter(queue, project, **{
        f.STATE: {'$in': KEEPABLE}, f.EXPIRES: {'$gt': now}})
    if created_after is not None:
        query[f.CREATED] = {'$gt': created_after}
    return Query(f.MESSAGES, query, [(f.POSITION, sort)],
                 'zd_state_position')


def keepable_positions(queue, project, floor=None, sort=1):
    """Positions (at or above ``floor``) in a keepable state, live or
    not, oldest first (1) or newest first (-1). Its filter and sort are
    all in ``{p, q, s, k}``, so projected on ``k`` it reads index keys
    only: the probe that bounds how many keepable messages there can
    be, and the cutoff walk when nothing expired or too old is left."""
    query = f.queue_filter(queue, project, **{f.STATE: {'$in': KEEPABLE}})
    if floor is not None:
        query[f.POSITION] = {'$gte': floor}
    return Query(f.MESSAGES, query, [(f.POSITION, sort)],
                 'zd_state_position')


def too_old(queue, project, now, created_after):
    """Live keepable messages created at or before ``created_after``,
    oldest first (removed by retention time)."""
    return Query(f.MESSAGES, f.queue_filter(queue, project, **{
        f.STATE: {'$in': KEEPABLE}, f.CREATED: {'$lte': created_after},
        f.EXPIRES: {'$gt': now}}), [(f.CREATED, 1)], 'zd_state_created')


def beyond_length(queue, project, now, created_after, cutoff):
    """Live keepable messages below the length cutoff, oldest first
    (removed by retention length)."""
    query = keepable(queue, project, now, created_after, 1)
    query.filter[f.POSITION] = {'$lt': cutoff}
    return query


def stale_moves(queue, project, started_before):
    """Messages frozen by group moves that started before a time."""
    return Query(f.MESSAGES, f.queue_filter(queue, project, **{
        f.STATE: f.MOVING, f.MOVE_STARTED: {'$lte': started_before}}),
        [(f.POSITION, 1)], 'zd_state_position')


def moves_started(queue, project, started_before):
    """Group moves from a queue that started before a time (gc)."""
    return Query(f.MOVES, f.queue_filter(queue, project, v={
        '$lte': started_before}), None, 'zd_move_started')


def of_move(queue, project, move_id):
    """The messages one move has frozen and not yet landed, in order."""
    return Query(f.MESSAGES, f.queue_filter(queue, project, **{
        f.STATE: f.MOVING, f.MOVE_ID: move_id}),
        [(f.POSITION, 1)], 'zd_state_position')


def ended_claims(queue, project, now):
    """Claims of a queue whose expiry has passed."""
    return Query(f.CLAIMS,
                 f.queue_filter(queue, project, **{f.EXPIRES: {'$lte': now}}),
                 [(f.EXPIRES, 1)], 'zd_claim_expires')


def of_claims(queue, project, claim_ids):
    """Messages still held by the given claims."""
    claim = (claim_ids[0] if len(claim_ids) == 1
             else {'$in': list(claim_ids)})
    return Query(f.MESSAGES, {f.CLAIM: claim, f.PROJECT: project,
                              f.QUEUE: queue, f.STATE: f.CLAIMED},
                 [(f.POSITION, 1)], 'zd_claim')


def by_ids(queue, project, message_ids):
    """Messages by id, inside one queue of one project."""
    return Query(f.MESSAGES, {'_id': {'$in': list(message_ids)},
                              f.PROJECT: project, f.QUEUE: queue},
                 None, '_id_')


def given_up(queue, project, after=None, before=None):
    """Positions of a queue given up by their writers, strictly between
    ``after`` and ``before`` (None: unbounded): counted by a consumer's
    page, pruned by gc (given_up.py)."""
    bounds = {}
    if after is not None:
        bounds['$gt'] = after
    if before is not None:
        bounds['$lt'] = before
    query = f.queue_filter(queue, project)
    if bounds:
        query[f.POSITION] = bounds
    return Query(f.GIVEN_UP, query, None, 'zd_given_up')


def pin_of(queue, project, groups):
    """The pins of some groups (sticky queues, pins.py)."""
    return Query(f.PINS, f.queue_filter(queue, project, **{
        f.GROUP: {'$in': list(groups)}}), None, 'zd_pin_group')


def pins_of(queue, project, client, pinned_by=None):
    """A client's pins, oldest first; those made at or before
    ``pinned_by`` when given."""
    query = f.queue_filter(queue, project, **{f.PIN_CLIENT: client})
    if pinned_by is not None:
        query[f.PINNED_AT] = {'$lte': pinned_by}
    return Query(f.PINS, query, [(f.PINNED_AT, 1)], 'zd_pin_client')


def pins(queue, project):
    """Every pin of a queue (stats, purge)."""
    return Query(f.PINS, f.queue_filter(queue, project), None,
                 'zd_pin_client')


def pinned_heads(queue, project, groups, client):
    """The heads of some groups that carry a pin to ``client``."""
    return Query(f.MESSAGES, f.queue_filter(queue, project, **{
        f.HEAD: {'$in': list(groups), '$exists': True}, f.PIN: client}),
        None, 'zd_group_head')


def sticky_client(queue, project, client):
    """One sticky client's activity."""
    return Query(f.STICKY_CLIENTS, f.queue_filter(queue, project, **{
        f.PIN_CLIENT: client}), None, 'zd_sticky_client')


def sticky_clients(queue, project, idle_at=None):
    """A queue's sticky clients, the first to go idle first; only those
    idle at ``idle_at`` when given."""
    query = f.queue_filter(queue, project)
    if idle_at is not None:
        query[f.ACTIVE_UNTIL] = {'$lte': idle_at}
    return Query(f.STICKY_CLIENTS, query, [(f.ACTIVE_UNTIL, 1)],
                 'zd_sticky_until')


ALL = (ready, waiting_for, page, due_now, any_live, delayed_due,
       claimed_due, expired, live, in_state, grouped, heads, group_head,
       group_first, keepable, keepable_positions, too_old, beyond_length,
       group_members, next_group, stale_moves, moves_started, of_move,
       ended_claims, of_claims, by_ids, given_up, pin_of, pins_of, pins,
       pinned_heads, sticky_client, sticky_clients)
