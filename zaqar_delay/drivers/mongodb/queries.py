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


def ready(queue, project, now):
    """Claimable messages, oldest position first (claim, pop)."""
    return Query(f.MESSAGES,
                 f.queue_filter(queue, project, **{
                     f.STATE: f.READY, f.EXPIRES: {'$gt': now}}),
                 [(f.POSITION, 1)], 'zd_state_position')


def page(queue, project, now, marker, states, client_uuid=None):
    """One listing page after ``marker``, in position order.

    ``states`` is the subset of message states to show; all three states
    need no state condition and walk the position index.
    """
    query = f.queue_filter(queue, project, **{f.EXPIRES: {'$gt': now}})
    if marker is not None:
        query[f.POSITION] = {'$gt': marker}
    if client_uuid is not None:
        query[f.CLIENT] = {'$ne': client_uuid}
    if set(states) == {f.READY, f.DELAYED, f.CLAIMED}:
        return Query(f.MESSAGES, query, [(f.POSITION, 1)], 'zd_position')
    query[f.STATE] = (states[0] if len(states) == 1
                      else {'$in': sorted(states)})
    return Query(f.MESSAGES, query, [(f.POSITION, 1)], 'zd_state_position')


def due_now(queue, project, now, sort):
    """Due messages, claimed or not: first/oldest/newest."""
    return Query(f.MESSAGES,
                 f.queue_filter(queue, project, **{
                     f.STATE: {'$in': [f.CLAIMED, f.READY]},
                     f.EXPIRES: {'$gt': now}}),
                 [(f.POSITION, sort)], 'zd_state_position')


def any_live(queue, project, now, sort):
    """Oldest or newest live message, delayed ones too (stats)."""
    return Query(f.MESSAGES,
                 f.queue_filter(queue, project, **{f.EXPIRES: {'$gt': now}}),
                 [(f.POSITION, sort)], 'zd_position')


def delayed_due(queue, project, now):
    """Delayed messages whose time has come (promoted to ready)."""
    return Query(f.MESSAGES,
                 f.queue_filter(queue, project, **{
                     f.STATE: f.DELAYED, f.DUE: {'$lte': now}}),
                 None, 'zd_state_due')


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


def grouped(queue, project, state=None):
    """Grouped messages of a queue, optionally in one state (stats)."""
    query = f.queue_filter(queue, project, **{f.GROUP: {'$exists': True}})
    if state is None:
        return Query(f.MESSAGES, query, None, 'zd_group')
    query[f.STATE] = state
    return Query(f.MESSAGES, query, None, 'zd_state_position')


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


ALL = (ready, page, due_now, any_live, delayed_due, expired, live, in_state,
       grouped, ended_claims, of_claims, by_ids)
