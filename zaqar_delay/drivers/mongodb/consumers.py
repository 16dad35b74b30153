"""Persistent consumers on MongoDB (SPEC §5, zaqar_delay/consumers.py).

A consumer's state lives in its subscription's document (subscriber
``cursor:<consume_id>``, subscriptions.py), so it goes with the
subscription, expiry included (reads filter on ``e``, as every
subscription read does), and the unique ``{p, s, u}`` index keeps one per
consume_id and queue. Fields, absent until first set:

======  ==============================================================
``ck``  cursor: last acknowledged position
``ch``  handed: last position handed to the consumer
``cl``  lost: positions skipped because their message went
``ca``  last active, epoch ms (store clock); set when created
``cm``  true: set when created, so Zaqar's notifier, which lists the
        subscriptions without it (index ``zd_sub_notified``), never
        reads a consumer's
======  ==============================================================

An update is one ``update_one`` with ``$max`` (cursor, handed only move
forward, whoever writes last), ``$inc`` and ``$set`` on the live
subscription, without upsert: a consumer forgotten meanwhile stays
forgotten. Listing a queue's consumers is one read of the ``{p, s, u}``
index from the ``cursor:`` prefix.
"""

import re

from zaqar_delay import consumers

CURSOR, HANDED, LOST, ACTIVE, MARK = 'ck', 'ch', 'cl', 'ca', 'cm'
# The fields a change of subscriber resets: the new consumer starts afresh.
STATE = (CURSOR, HANDED, LOST)
# Every consumer field: a subscriber changed to another scheme drops them.
FIELDS = STATE + (ACTIVE, MARK)

_ANY = {'$regex': '^' + re.escape(consumers.PREFIX)}
# Consumers a queue deletion resets per request (restart).
RESTART_BATCH = 100


def _where(queue, project, now, subscriber):
    return {'p': project, 's': queue, 'u': subscriber, 'e': {'$gt': now}}


def _consumer(doc):
    return consumers.Consumer(
        consume_id=doc['u'][len(consumers.PREFIX):],
        cursor=doc.get(CURSOR), handed=doc.get(HANDED),
        lost=doc.get(LOST, 0), last_active_ms=doc.get(ACTIVE, 0))


def _fields():
    return {'u': True, CURSOR: True, HANDED: True, LOST: True,
            ACTIVE: True, '_id': False}


def one(driver, queue, project, consume_id):
    now = driver.now()
    doc = driver.subscriptions.find_one(
        _where(queue, project, now, consumers.PREFIX + consume_id),
        _fields())
    return now, None if doc is None else _consumer(doc)


def any_live(driver, queue, project):
    """Whether the queue has a persistent consumer: one key of the
    ``{p, s, u}`` index at most."""
    return driver.subscriptions.find_one(
        _where(queue, project, driver.now(), _ANY), {'_id': True}) \
        is not None


def every(driver, queue, project):
    now = driver.now()
    docs = driver.subscriptions.find(
        _where(queue, project, now, _ANY), _fields(), [('u', 1)], 0,
        'zd_sub_subscriber')
    return now, [_consumer(doc) for doc in docs]


def live_readers(driver, queue, project, idle_s, idle=True):
    """(live consumers, their lowest cursor as consumers.lowest_cursor,
    idle consumers, None unless ``idle``): a count of the
    ``zd_sub_active`` range (two with ``idle``, which only stats want)
    and one probe of ``zd_sub_cursor`` (it steps over idle consumers' keys
    whose cursor is lower), never a read of every consumer, which claims
    on a queue with ``consumers_required`` and every stats call need."""
    now = driver.now()
    since = now - idle_s * 1000
    where = {'p': project, 's': queue, 'e': {'$gt': now}}
    live_ones = dict(where, **{ACTIVE: {'$gt': since}})
    live = driver.subscriptions.count_documents(live_ones,
                                                hint='zd_sub_active')
    idle_ones = driver.subscriptions.count_documents(
        dict(where, **{ACTIVE: {'$lte': since}}),
        hint='zd_sub_active') if idle else None
    if not live:
        return 0, None, idle_ones
    # A consumer that acknowledged nothing has no ``ck``: it sorts first.
    lowest = driver.subscriptions.find(live_ones, {CURSOR: True, '_id': False},
                                       [(CURSOR, 1)], 1, 'zd_sub_cursor')
    cursor = lowest[0].get(CURSOR) if lowest else None
    return live, -1 if cursor is None else cursor, idle_ones


def update(driver, queue, project, consume_id, ack, handed, lost):
    now = driver.now()
    change = {'$set': {ACTIVE: now}}
    forward = {}
    if ack is not None:
        forward[CURSOR] = ack
    if handed is not None:
        forward[HANDED] = handed
    if forward:
        change['$max'] = forward
    where = _where(queue, project, now, consumers.PREFIX + consume_id)
    if lost and handed is not None:
        # A page handed again (two requests of one page at once, or a
        # retry) counts its gap once, as on Redis: the loss goes with the
        # update that moves ``handed`` past its stored value, which one
        # request alone can do (one document, one atomic update).
        onward = dict(where, **{'$or': [{HANDED: {'$lt': handed}},
                                        {HANDED: None}]})
        if driver.subscriptions.update_one(onward, dict(change, **{
                '$inc': {LOST: lost}})).matched_count:
            return
    elif lost:
        change['$inc'] = {LOST: lost}
    driver.subscriptions.update_one(where, change)


def restart(driver, queue, project):
    """The queue's consumers start again from its beginning (queue
    deletion): the positions of a queue created again start from 1, and a
    cursor from before would skip its messages, or count them as read by
    all. ``lost`` stays, as on Redis (purge.lua). RESTART_BATCH consumers
    per update, walking the ``{p, s, u}`` index by subscriber: Zaqar does
    not bound subscriptions."""
    after = consumers.PREFIX
    while True:
        batch = driver.subscriptions.find(
            {'p': project, 's': queue, 'u': dict(_ANY, **{'$gt': after})},
            {'u': True}, [('u', 1)], RESTART_BATCH, 'zd_sub_subscriber')
        if not batch:
            return
        driver.subscriptions.update_many(
            {'_id': {'$in': [doc['_id'] for doc in batch]}},
            {'$unset': {CURSOR: '', HANDED: ''}})
        after = batch[-1]['u']


def fresh(subscriber, now):
    """The consumer fields a subscription document with ``subscriber``
    starts with (none for other schemes)."""
    if consumers.consume_id_of(subscriber) is None:
        return {}
    return {ACTIVE: now, MARK: True}
