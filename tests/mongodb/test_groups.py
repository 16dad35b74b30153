"""Message groups on MongoDB: the stored layout, the one-head rule, and
recovery from a process that stopped between two steps.

The contract tests (tests/contract/test_groups.py) check behaviour; these
check how the driver stores it and that every interrupted multi-step
change is finished or undone by ``gc()`` without losing, duplicating or
reordering a group's messages. A "crash" is simulated by running the
first steps of an operation and then not the rest.
"""

import json

import pytest
from pymongo import errors as mongo_errors

from tests.contract.helpers import claim, listed, post, stats
from tests.contract.test_queue_stage import through_pipeline
from tests.mongodb.examined import Examined
from tests.mongodb.test_consumers import subscribe
from tests.mongodb.test_given_up import lost
from tests.mongodb.test_post_horizon import read_all
from zaqar_delay import errors
from zaqar_delay import rules
from zaqar_delay.drivers.mongodb import fields
from zaqar_delay.drivers.mongodb import group_moves
from zaqar_delay.drivers.mongodb import groups
from zaqar_delay.drivers.mongodb import reservations
from zaqar_delay.drivers.mongodb import state

GROUPED = {'_message_group_key': 'g'}


def msg(group, n):
    return {'g': group, 'n': n}


def names(messages):
    return ['%s%s' % (m['body']['g'], m['body']['n']) for m in messages]


@pytest.fixture
def grouped(driver, project):
    driver.queue_controller.create('q', metadata=GROUPED, project=project)
    return 'q'


def docs(driver, queue, project):
    return list(driver.messages.raw.find(
        fields.queue_filter(queue, project)).sort('k', 1))


def layout(driver, queue, project):
    """(group, n, state, is head) of each stored message, in order."""
    return [(d.get('g'), _n(d), d['s'], 'h' in d)
            for d in docs(driver, queue, project)]


def _n(doc):
    return json.loads(doc['b'])['n']


def test_members_behind_the_head_are_stored_blocked(driver, project,
                                                    grouped):
    post(driver, grouped, project, msg('a', 1), msg('a', 2), {'n': 3},
         msg('b', 4), msg('a', 5))
    assert layout(driver, grouped, project) == [
        ('"a"', 1, 'r', True), ('"a"', 2, 'b', False), (None, 3, 'r', False),
        ('"b"', 4, 'r', True), ('"a"', 5, 'b', False)]
    head = driver.messages.raw.find_one({'p': project, 'h': '"a"'})
    assert head['h'] == head['g'] == '"a"'


def test_the_head_keeps_its_mark_through_claim_and_release(driver, project,
                                                           grouped, clock):
    post(driver, grouped, project, msg('a', 1), msg('a', 2))
    claim_id, _ = claim(driver, grouped, project, ttl=30, grace=0)
    assert layout(driver, grouped, project)[0] == ('"a"', 1, 'c', True)
    driver.claim_controller.delete(grouped, claim_id, project=project)
    assert [row[2:] for row in layout(driver, grouped, project)] == [
        ('d', True), ('b', False)]
    clock.advance(1)
    claim(driver, grouped, project)
    assert layout(driver, grouped, project)[0][2:] == ('c', True)


def test_a_second_head_is_a_duplicate_key_whoever_tries(driver, project,
                                                        grouped):
    post(driver, grouped, project, msg('a', 1), msg('a', 2))
    blocked = docs(driver, grouped, project)[1]
    with pytest.raises(mongo_errors.DuplicateKeyError):
        driver.messages.raw.update_one(
            {'_id': blocked['_id']}, {'$set': {'s': 'r', 'h': '"a"'}})
    assert layout(driver, grouped, project)[1][2:] == ('b', False)


def test_advance_is_idempotent(driver, project, grouped):
    ids = post(driver, grouped, project, msg('a', 1), msg('a', 2))
    now = driver.now()
    for _ in range(3):
        head = groups.advance(driver, grouped, project, '"a"', now)
        assert head['_id'] == ids[0]
    assert [row[3] for row in layout(driver, grouped, project)] == [
        True, False]


def test_an_expired_head_is_dropped_by_whoever_advances(driver, project,
                                                        grouped, clock):
    post(driver, grouped, project, msg('a', 1), ttl=10)
    ids = post(driver, grouped, project, msg('a', 2), ttl=100)
    clock.advance(11)
    head = groups.advance(driver, grouped, project, '"a"', driver.now())
    assert head['_id'] == ids[0]
    assert layout(driver, grouped, project) == [('"a"', 2, 'r', True)]


def test_gc_gives_a_head_to_a_group_whose_head_left_in_a_crash(
        driver, project, grouped):
    ids = post(driver, grouped, project, msg('a', 1), msg('a', 2),
               msg('a', 3), msg('b', 1))
    # The delete ran, the advance after it did not.
    driver.messages.raw.delete_one({'_id': ids[0]})
    assert names(claim(driver, grouped, project)[1]) == ['b1']
    driver.gc()
    assert names(claim(driver, grouped, project)[1]) == ['a2']


def test_gc_gives_a_head_to_a_group_posted_in_a_crash(driver, project,
                                                      grouped):
    now = driver.now()
    messages = driver.message_controller
    first, _ = reservations.reserve(driver, grouped, project, 2, now)
    prepared = [messages.document(grouped, project, _new('"z"', n), 'c',
                                  now, first + n) for n in (0, 1)]
    driver.messages.insert_many(prepared)    # inserted, never advanced
    assert claim(driver, grouped, project) == (None, [])
    driver.gc()
    _, got = claim(driver, grouped, project)
    assert [m['body']['n'] for m in got] == [0]


def _new(group, n):
    body = {'g': json.loads(group), 'n': n}
    return rules.NewMessage(id='m-%d' % n, ttl=300, delay=0, body=body,
                            body_json=json.dumps(body), group=group)


def test_gc_repair_resumes_at_its_cursor(driver, project, grouped,
                                         monkeypatch):
    post(driver, grouped, project, *[msg(g, 1) for g in 'abcde'])
    driver.messages.raw.update_many(
        {'p': project}, {'$set': {'s': 'b'}, '$unset': {'h': ''}})
    original = groups.repair
    monkeypatch.setattr(groups, 'repair', lambda *a, **k: original(
        *a, **dict(k, batch=2)))
    driver.gc()
    counter = driver.counters.raw.find_one({'p': project, 'q': grouped})
    assert counter['gr'] == '"b"'
    assert [row[3] for row in layout(driver, grouped, project)] == [
        True, True, False, False, False]
    driver.gc()
    driver.gc()
    assert 'gr' not in driver.counters.raw.find_one(
        {'p': project, 'q': grouped})
    assert all(row[3] for row in layout(driver, grouped, project))


def test_one_message_per_group_even_when_dead_letters_free_the_next(
        driver, project, clock):
    driver.queue_controller.create('dlq', metadata=GROUPED, project=project)
    driver.queue_controller.create(
        'q', metadata=dict(GROUPED, _max_claim_count=1,
                           _dead_letter_queue='dlq'), project=project)
    post(driver, 'q', project, msg('a', 1), msg('a', 2), msg('a', 3))
    claim(driver, 'q', project, ttl=10, grace=0)
    clock.advance(11)
    assert names(claim(driver, 'q', project)[1]) == ['a2']
    # In the dead-letter queue the message is the head of its group there.
    assert layout(driver, 'dlq', project) == [('"a"', 1, 'r', True)]
    assert layout(driver, 'q', project)[-1] == ('"a"', 3, 'b', False)


def test_move_lands_in_order_and_forgets_itself(driver, project, grouped):
    driver.queue_controller.create('t', metadata=GROUPED, project=project)
    post(driver, 't', project, msg('a', 0))
    post(driver, grouped, project, msg('a', 1), msg('b', 1), msg('a', 2))
    assert driver.message_controller.move_group(
        grouped, 'a', 't', project=project) == 2
    assert layout(driver, 't', project) == [
        ('"a"', 0, 'r', True), ('"a"', 1, 'b', False),
        ('"a"', 2, 'b', False)]
    assert driver.moves.raw.count_documents({}) == 0
    assert all('mi' not in d for d in docs(driver, 't', project))


def _frozen_move(driver, project, queue, target, group):
    """Run a move up to its freeze; return its id (the mover "crashed")."""
    now = driver.now()
    head = groups.advance(driver, queue, project, group, now)
    move_id = 'crashed-move'
    driver.moves.insert_one(fields.queue_filter(queue, project, **{
        '_id': move_id, 'g': group, 't': target, 'st': 'f', 'v': now}))
    assert group_moves._freeze(driver, queue, project, group, target,
                               move_id, head, now)
    return move_id


def test_a_frozen_group_cannot_be_claimed_or_advanced(driver, project,
                                                      grouped):
    driver.queue_controller.create('t', project=project)
    post(driver, grouped, project, msg('a', 1), msg('a', 2), msg('b', 1))
    _frozen_move(driver, project, grouped, 't', '"a"')
    assert [row[2] for row in layout(driver, grouped, project)] == [
        'm', 'm', 'r']
    assert names(claim(driver, grouped, project)[1]) == ['b1']
    head = groups.advance(driver, grouped, project, '"a"', driver.now())
    assert head['s'] == 'm'
    with pytest.raises(errors.GroupInFlight):
        driver.message_controller.move_group(grouped, 'a', 't',
                                             project=project)


def test_gc_aborts_a_move_that_crashed_before_its_commit(driver, project,
                                                         grouped, clock):
    driver.queue_controller.create('t', project=project)
    ids = post(driver, grouped, project, msg('a', 1), msg('a', 2),
               ttl=3600)
    _frozen_move(driver, project, grouped, 't', '"a"')
    driver.gc()                               # too young: left alone
    assert [row[2] for row in layout(driver, grouped, project)] == [
        'm', 'm']
    clock.advance(group_moves.MOVE_TIMEOUT_MS / 1000 + 1)
    driver.gc()
    assert layout(driver, grouped, project) == [
        ('"a"', 1, 'r', True), ('"a"', 2, 'b', False)]
    assert listed(driver, 't', project) == []
    assert driver.moves.raw.count_documents({}) == 0
    assert [m['id'] for m in claim(driver, grouped, project)[1]] == [ids[0]]


def test_gc_lands_a_move_that_crashed_after_its_commit(driver, project,
                                                       grouped, clock):
    driver.queue_controller.create('t', metadata=GROUPED, project=project)
    ids = post(driver, grouped, project, msg('a', 1), msg('a', 2),
               msg('a', 3), ttl=3600)
    move_id = _frozen_move(driver, project, grouped, 't', '"a"')
    assert group_moves._decide(driver, move_id, 'c') == 'c'
    # The first message landed, then the mover stopped.
    now = driver.now()
    first = docs(driver, grouped, project)[:1]
    group_moves._land(driver, grouped, project, first, 't',
                      driver.message_controller.policy('t', project), now)
    assert [row[1] for row in layout(driver, 't', project)] == [1]
    # No advance in the source promotes what the move holds.
    assert groups.advance(driver, grouped, project, '"a"', now)['s'] == 'm'
    clock.advance(group_moves.MOVE_TIMEOUT_MS / 1000 + 1)
    driver.gc()
    assert layout(driver, grouped, project) == []
    assert [m['id'] for m in listed(driver, 't', project)] == ids
    assert names(claim(driver, 't', project)[1]) == ['a1']
    assert driver.moves.raw.count_documents({}) == 0


def test_gc_unfreezes_messages_whose_move_is_gone(driver, project, grouped,
                                                  clock):
    driver.queue_controller.create('t', project=project)
    post(driver, grouped, project, msg('a', 1), msg('a', 2), ttl=3600)
    _frozen_move(driver, project, grouped, 't', '"a"')
    driver.moves.raw.delete_many({})
    clock.advance(group_moves.MOVE_TIMEOUT_MS / 1000 + 1)
    driver.gc()
    assert [row[2:] for row in layout(driver, grouped, project)] == [
        ('r', True), ('b', False)]


def test_gc_reads_a_large_group_frozen_by_a_dead_mover_in_batches(
        driver, project, grouped, clock, monkeypatch):
    """gc found the moves of frozen messages by reading every frozen
    message with one unbounded find, on every pass while the move was
    stale: one read that grew with the group."""
    size = 3 * group_moves.LAND_BATCH
    driver.queue_controller.create('t', project=project)
    post(driver, grouped, project, *[msg('a', n) for n in range(size)],
         ttl=3600)
    _frozen_move(driver, project, grouped, 't', '"a"')
    clock.advance(group_moves.MOVE_TIMEOUT_MS / 1000 + 1)
    find, returned = driver.messages.find, []

    def counted(*args, **kwargs):
        found = find(*args, **kwargs)
        returned.append(len(found))
        return found

    monkeypatch.setattr(driver.messages, 'find', counted)
    driver.gc()
    monkeypatch.undo()
    assert max(returned) <= group_moves.LAND_BATCH
    assert len(listed(driver, grouped, project)) == size


def test_a_move_aborted_under_a_slow_mover_moves_nothing(
        driver, project, grouped, monkeypatch):
    driver.queue_controller.create('t', project=project)
    post(driver, grouped, project, msg('a', 1), msg('a', 2))
    original = group_moves._decide

    def gc_got_there_first(drv, move_id, wanted):
        original(drv, move_id, group_moves.ABORTED)
        return original(drv, move_id, wanted)

    monkeypatch.setattr(group_moves, '_decide', gc_got_there_first)
    with pytest.raises(errors.GroupInFlight):
        driver.message_controller.move_group(grouped, 'a', 't',
                                             project=project)
    assert layout(driver, grouped, project) == [
        ('"a"', 1, 'r', True), ('"a"', 2, 'b', False)]
    assert listed(driver, 't', project) == []


def test_a_move_meeting_members_another_move_froze_moves_nothing(
        driver, project, grouped, clock, monkeypatch):
    """A mover stalled inside its freeze past MOVE_TIMEOUT; gc aborted its
    move and unfroze what it had frozen; the mover woke and froze the
    other members under its dead move. The client's retry then froze
    and moved only the members that were not frozen, splitting the
    group between the two queues. It now refuses until the late freeze
    is undone, and the group then moves whole."""
    driver.queue_controller.create('t', metadata=GROUPED, project=project)
    ids = post(driver, grouped, project, *[msg('a', n) for n in range(4)],
               ttl=3600)
    update, decide = driver.messages.update_one, group_moves._decide
    bulk = driver.messages.bulk_write
    first, stalled, retried = [], [], []

    def head_update(where, change, *args, **kwargs):
        move_id = change.get('$set', {}).get(fields.MOVE_ID)
        if move_id and not first:
            first.append(move_id)
        return update(where, change, *args, **kwargs)

    def stalling_bulk(requests, *args, **kwargs):
        # The mover froze the head, then stalled before the request that
        # freezes the other members.
        if not stalled:
            stalled.append(len(requests))
            clock.advance(group_moves.MOVE_TIMEOUT_MS / 1000 + 1)
            driver.gc()                         # aborts the first move
        return bulk(requests, *args, **kwargs)

    def retry_before_commit(drv, move_id, wanted):
        if (move_id == first[0] and wanted == group_moves.COMMITTED
                and not retried):       # the mover's commit, not gc's abort
            with pytest.raises(errors.GroupInFlight):
                drv.message_controller.move_group(grouped, 'a', 't',
                                                  project=project)
            retried.append(move_id)
        return decide(drv, move_id, wanted)

    monkeypatch.setattr(driver.messages, 'update_one', head_update,
                        raising=False)
    monkeypatch.setattr(driver.messages, 'bulk_write', stalling_bulk,
                        raising=False)
    monkeypatch.setattr(group_moves, '_decide', retry_before_commit)
    with pytest.raises(errors.GroupInFlight):
        driver.message_controller.move_group(grouped, 'a', 't',
                                             project=project)
    monkeypatch.undo()
    assert stalled == [3] and first
    assert retried and listed(driver, 't', project) == []
    assert [m['id'] for m in listed(driver, grouped, project,
                                    include_claimed=True)] == ids
    assert driver.message_controller.move_group(grouped, 'a', 't',
                                                project=project) == 4
    assert [m['id'] for m in listed(driver, 't', project)] == ids


def target_created_again(driver, project, monkeypatch, posts,
                         deleted=None):
    """Before the move lands, target 't' is deleted and created again
    (its positions start afresh: a deletion keeps the counter a day
    only) and gets ``posts`` messages n1, n2, ..., the one at index
    ``deleted`` deleted again."""
    land, done = group_moves._land, []

    def created_again(*args, **kwargs):
        if not done:
            done.append(True)
            through_pipeline(driver).delete('t', project=project)
            driver.counters.raw.delete_one({'p': project, 'q': 't'})
            driver.queue_controller.create('t', metadata=GROUPED,
                                           project=project)
            ids = post(driver, 't', project,
                       *[msg('n', n) for n in range(1, posts + 1)],
                       ttl=3600)
            if deleted is not None:
                driver.message_controller.delete('t', ids[deleted],
                                                 project=project)
        return land(*args, **kwargs)

    monkeypatch.setattr(group_moves, '_land', created_again)


def test_a_move_whose_target_was_created_again_lands_at_its_tail(
        driver, project, grouped, monkeypatch):
    """The move reserved positions in its target; the target was deleted
    and created again with its positions starting afresh (a deletion
    keeps the position counter a day only) and got posts before the move
    landed. The landing collided on the unique position index: the group
    stayed frozen, in no queue's listing, and gc's finish collided the
    same way on every pass."""
    driver.queue_controller.create('t', metadata=GROUPED, project=project)
    post(driver, 't', project, msg('t', 0))
    post(driver, grouped, project, msg('a', 1), msg('a', 2), msg('a', 3),
         ttl=3600)
    target_created_again(driver, project, monkeypatch, 2)
    assert driver.message_controller.move_group(
        grouped, 'a', 't', project=project) == 3
    monkeypatch.undo()
    assert names(listed(driver, 't', project)) == ['n1', 'n2', 'a1', 'a2',
                                                   'a3']
    assert layout(driver, grouped, project) == []
    assert driver.moves.raw.count_documents({}) == 0


def test_a_landing_that_meets_a_taken_position_midway_keeps_the_order(
        driver, project, grouped, monkeypatch):
    """A page lands in one ordered bulk write: when the target, created
    again, holds a message at the second reserved position but not the
    first, the first lands there, the second at the tail, and the third
    after it (at or below where the second landed, so at the tail too),
    never at its own reserved position in front of the second."""
    driver.queue_controller.create('t', metadata=GROUPED, project=project)
    post(driver, 't', project, msg('t', 0))
    post(driver, grouped, project, msg('a', 1), msg('a', 2), msg('a', 3),
         ttl=3600)
    target_created_again(driver, project, monkeypatch, 3, deleted=1)
    assert driver.message_controller.move_group(
        grouped, 'a', 't', project=project) == 3
    monkeypatch.undo()
    assert names(listed(driver, 't', project)) == ['n1', 'a1', 'n3', 'a2',
                                                   'a3']


def test_purge_group_and_stats_count_frozen_and_blocked(driver, project,
                                                        grouped):
    post(driver, grouped, project, msg('a', 1), msg('a', 2), msg('b', 1))
    counts = stats(driver, grouped, project)
    assert (counts['total'], counts['free'], counts['groups']) == (3, 3, 2)
    assert groups.purge(driver, grouped, project, '"a"',
                        driver.now()) == 2
    assert layout(driver, grouped, project) == [('"b"', 1, 'r', True)]


def test_settle_purge_advances_groups_of_expired_heads(driver, project,
                                                       grouped, clock):
    post(driver, grouped, project, msg('a', 1), ttl=10)
    post(driver, grouped, project, msg('a', 2), ttl=100)
    clock.advance(11)
    assert state.purge_expired(driver, grouped, project, driver.now(),
                               None) == 1
    assert layout(driver, grouped, project) == [('"a"', 2, 'r', True)]


def test_a_delayed_group_moves_and_unfreezes_as_waiting_members(
        driver, project, clock):
    """Members not due are ``w`` wherever they land: in the target of a
    move (their remaining delay), and back in the source when gc aborts a
    crashed move; once due, settling makes them ``b``."""
    grouped = 'q'
    driver.queue_controller.create(grouped, metadata=dict(
        GROUPED, _default_message_delay=900), project=project)
    driver.queue_controller.create('t', metadata=GROUPED, project=project)
    post(driver, grouped, project, msg('a', 1), msg('a', 2), msg('b', 1),
         msg('b', 2), ttl=3600)
    assert [row[2:] for row in layout(driver, grouped, project)] == [
        ('d', True), ('w', False), ('d', True), ('w', False)]
    assert driver.message_controller.move_group(
        grouped, 'a', 't', project=project) == 2
    assert layout(driver, 't', project) == [
        ('"a"', 1, 'd', True), ('"a"', 2, 'w', False)]
    _frozen_move(driver, project, grouped, 't', '"b"')
    clock.advance(group_moves.MOVE_TIMEOUT_MS / 1000 + 1)
    driver.gc()
    assert layout(driver, grouped, project) == [
        ('"b"', 1, 'd', True), ('"b"', 2, 'w', False)]
    clock.advance(900)
    assert names(listed(driver, 't', project)) == ['a1', 'a2']
    assert [row[2] for row in layout(driver, 't', project)] == ['r', 'b']


def test_a_move_lands_a_page_of_messages_at_a_time(driver, project,
                                                   grouped, monkeypatch):
    """What a move reads to land (bodies included, for the target's group
    key) is LAND_BATCH messages at a time (2 here), not the whole group."""
    monkeypatch.setattr(group_moves, 'LAND_BATCH', 2)
    driver.queue_controller.create('t', metadata=GROUPED, project=project)
    post(driver, grouped, project, *[msg('a', n) for n in range(5)])
    pages, real_land = [], group_moves._land

    def land(driver_, queue, project_, docs, *args):
        pages.append([_n(doc) for doc in docs])
        return real_land(driver_, queue, project_, docs, *args)

    monkeypatch.setattr(group_moves, '_land', land)
    assert driver.message_controller.move_group(
        grouped, 'a', 't', project=project) == 5
    assert pages == [[0, 1], [2, 3], [4]]
    assert [row[1:] for row in layout(driver, 't', project)] == [
        (0, 'r', True)] + [(n, 'b', False) for n in range(1, 5)]


def test_a_move_freezes_a_large_group_a_page_at_a_time(
        driver, project, grouped, monkeypatch):
    """The freeze read the whole group (its ids and states) with one
    unbounded find before its commit: a move's memory and the time
    before its commit grew with the group."""
    size = 3 * group_moves.FREEZE_BATCH + group_moves.FREEZE_BATCH // 2
    driver.queue_controller.create('t', metadata=GROUPED, project=project)
    post(driver, grouped, project, *[msg('a', n) for n in range(size)],
         ttl=3600)
    examined = Examined(monkeypatch)
    find, returned = driver.messages.find, []

    def counted(*args, **kwargs):
        found = find(*args, **kwargs)
        returned.append(len(found))
        return found

    monkeypatch.setattr(driver.messages, 'find', counted)
    assert driver.message_controller.move_group(
        grouped, 'a', 't', project=project) == size
    monkeypatch.undo()
    assert max(returned) <= group_moves.FREEZE_BATCH
    assert examined.largest <= group_moves.FREEZE_BATCH
    assert [row[1:] for row in layout(driver, 't', project)] == [
        (0, 'r', True)] + [(n, 'b', False) for n in range(1, size)]
    assert layout(driver, grouped, project) == []


def test_a_move_freezes_and_lands_each_page_in_one_request(
        driver, project, grouped, monkeypatch):
    """The move sent one update per member to freeze it before its
    commit, and one per member to land it after: a group of thousands
    cost twice as many round trips. Now the head is frozen on its own (a
    claimed head refuses the move before anything else is frozen), then
    each page's other members in one bulk write, and each page lands in
    one bulk write."""
    size = 2 * group_moves.FREEZE_BATCH + 10
    assert group_moves.LAND_BATCH == group_moves.FREEZE_BATCH
    driver.queue_controller.create('t', metadata=GROUPED, project=project)
    post(driver, grouped, project, *[msg('a', n) for n in range(size)],
         ttl=3600)
    update, bulk, sent = (driver.messages.update_one,
                          driver.messages.bulk_write, [])

    def kind(change):
        changed = change.get('$set', {})
        return ('freeze' if fields.MOVE_ID in changed
                else 'land' if changed.get(fields.QUEUE) == 't' else None)

    def counted_update(where, change, *args, **kwargs):
        if kind(change):
            sent.append((kind(change), 1))
        return update(where, change, *args, **kwargs)

    def counted_bulk(requests, *args, **kwargs):
        sent.append((kind(requests[0]._doc), len(requests)))
        return bulk(requests, *args, **kwargs)

    monkeypatch.setattr(driver.messages, 'update_one', counted_update,
                        raising=False)
    monkeypatch.setattr(driver.messages, 'bulk_write', counted_bulk,
                        raising=False)
    assert driver.message_controller.move_group(
        grouped, 'a', 't', project=project) == size
    monkeypatch.undo()
    page = group_moves.FREEZE_BATCH
    assert sent == [('freeze', 1), ('freeze', page - 1), ('freeze', page),
                    ('freeze', 10), ('land', page), ('land', page),
                    ('land', 10)]
    assert [row[1:] for row in layout(driver, 't', project)] == [
        (0, 'r', True)] + [(n, 'b', False) for n in range(1, size)]


def test_members_posted_while_a_move_freezes_stay(driver, project,
                                                  grouped, monkeypatch):
    """As on Redis and Swift: the move takes the group up to its last
    member when the freeze began."""
    monkeypatch.setattr(group_moves, 'FREEZE_BATCH', 2)
    driver.queue_controller.create('t', metadata=GROUPED, project=project)
    post(driver, grouped, project, *[msg('a', n) for n in range(5)])
    reserve, posted = reservations.reserve, []

    def posted_meanwhile(*args, **kwargs):
        if kwargs.get('token', '').endswith(group_moves.PAGE_TOKEN) \
                and not posted:
            posted.append(post(driver, grouped, project, msg('a', 5)))
        return reserve(*args, **kwargs)

    monkeypatch.setattr(reservations, 'reserve', posted_meanwhile)
    assert driver.message_controller.move_group(
        grouped, 'a', 't', project=project) == 5
    assert posted
    assert names(listed(driver, 't', project)) == [
        'a%d' % n for n in range(5)]
    assert names(claim(driver, grouped, project)[1]) == ['a5']


def target_with_a_reader(driver, project):
    """Grouped queue 't' with one message that a persistent consumer has
    read: gc keeps the positions given up there (given_up.prune) and the
    consumer's next page counts what it skips. Returns its consume id."""
    driver.queue_controller.create('t', metadata=GROUPED, project=project)
    consume_id, _ = subscribe(driver, 't', project)
    post(driver, 't', project, msg('t', 0), ttl=3600)
    assert len(read_all(driver, 't', project, consume_id)) == 1
    return consume_id


@pytest.mark.parametrize('stopped_at', [3, 4])
def test_gc_aborts_a_move_stopped_midway_through_its_freeze(
        driver, project, grouped, clock, monkeypatch, stopped_at):
    """The mover died after freezing the first page (two members),
    during the second page's request (one bulk write): before any of its
    updates applied, or after the first. gc unfreezes what it froze, and
    gives up every position it reserved in the target."""
    monkeypatch.setattr(group_moves, 'FREEZE_BATCH', 2)
    consume_id = target_with_a_reader(driver, project)
    ids = post(driver, grouped, project, *[msg('a', n) for n in range(5)],
               ttl=3600)
    bulk, pages = driver.messages.bulk_write, []

    def dying_bulk(requests, *args, **kwargs):
        # The first page's head is frozen on its own, its other member
        # by the first bulk write; the second page's dies.
        pages.append(len(requests))
        if len(pages) == 2:
            applied = requests[:stopped_at - 3]
            if applied:
                bulk(applied, *args, **kwargs)
            raise errors.BackendUnavailable(backend='MongoDB',
                                            reason='died')
        return bulk(requests, *args, **kwargs)

    monkeypatch.setattr(driver.messages, 'bulk_write', dying_bulk,
                        raising=False)
    with pytest.raises(errors.BackendUnavailable):
        driver.message_controller.move_group(grouped, 'a', 't',
                                             project=project)
    monkeypatch.undo()
    assert pages == [1, 2]
    assert [row[2] for row in layout(driver, grouped, project)] == (
        ['m'] * (stopped_at - 1) + ['b'] * (6 - stopped_at))
    clock.advance(group_moves.MOVE_TIMEOUT_MS / 1000 + 1)
    driver.gc()
    assert layout(driver, grouped, project) == [('"a"', 0, 'r', True)] + [
        ('"a"', n, 'b', False) for n in range(1, 5)]
    assert given_up_positions(driver, 't', project) == [2, 3, 4, 5]
    assert driver.moves.raw.count_documents({}) == 0
    counter = driver.counters.find_one(fields.queue_filter('t', project))
    assert not counter.get(fields.RESERVATIONS)
    assert driver.message_controller.move_group(
        grouped, 'a', 't', project=project) == 5
    assert len(read_all(driver, 't', project, consume_id)) == 5
    assert lost(driver, 't', project, consume_id) == 0
    assert [m['id'] for m in listed(driver, 't', project)][1:] == ids


def test_a_page_left_empty_in_the_middle_of_a_move_is_given_up(
        driver, project, grouped, monkeypatch):
    """Only the first page and the last one keep a reservation entry; a
    member of a page between them deleted while frozen leaves its target
    position empty, given up through the page range it carries."""
    monkeypatch.setattr(group_moves, 'FREEZE_BATCH', 2)
    consume_id = target_with_a_reader(driver, project)
    ids = post(driver, grouped, project, *[msg('a', n) for n in range(6)],
               ttl=3600)
    move_id = _frozen_move(driver, project, grouped, 't', '"a"')
    assert [d[fields.MOVE_RANGE] for d in docs(driver, grouped, project)] \
        == [[2, 2], [2, 2], [4, 2], [4, 2], [6, 2], [6, 2]]
    driver.message_controller.delete(grouped, ids[3], project=project)
    assert group_moves._decide(driver, move_id, 'c') == 'c'
    assert group_moves._finish(driver, grouped, project, move_id,
                               driver.now()) == 5
    assert [m['id'] for m in listed(driver, 't', project)][1:] == (
        ids[:3] + ids[4:])
    assert given_up_positions(driver, 't', project) == [5]
    assert len(read_all(driver, 't', project, consume_id)) == 5
    assert lost(driver, 't', project, consume_id) == 0


def test_a_move_whose_mover_died_after_its_commit_holds_the_readers_back(
        driver, project, grouped, clock):
    """The mover died after its commit, before landing anything. gc lands
    the move MOVE_TIMEOUT after it started, at the positions it reserved
    in the target: a persistent reader let past them once a post's
    reservation_timeout had passed would never get the moved messages
    (they land below its cursor), and read-by-all could remove them
    unread. The move's reservation holds the reader back until then."""
    consume_id = target_with_a_reader(driver, project)
    post(driver, grouped, project, msg('a', 1), msg('a', 2), ttl=3600)
    move_id = _frozen_move(driver, project, grouped, 't', '"a"')
    assert group_moves._decide(driver, move_id, 'c') == 'c'
    clock.advance(driver.store_conf.reservation_timeout + 1)
    post(driver, 't', project, msg('t', 1), ttl=3600)
    assert read_all(driver, 't', project, consume_id) == []
    clock.advance(group_moves.MOVE_TIMEOUT_MS / 1000)
    driver.gc()
    assert read_all(driver, 't', project, consume_id) == [
        msg('a', 1), msg('a', 2), msg('t', 1)]
    assert lost(driver, 't', project, consume_id) == 0


def given_up_positions(driver, queue, project):
    return sorted(doc[fields.POSITION] for doc in driver.given_up.raw.find(
        fields.queue_filter(queue, project)))
