"""Sticky groups on MongoDB (pins.py): what the contract tests cannot
see. A claim never reads heads pinned to other clients, idle clients'
groups are freed in bounded batches, and the two races a sweep has with
claims and promotions leave pins and heads agreeing."""

import pytest

from benchmarks import round_trips
from localstack.factories import mongodb as mongodb_factory
from tests.contract.helpers import claim, post, stats
from tests.contract.test_sticky import ALICE, BOB, STICKY, STICKY_S
from tests.contract.test_sticky import claim_as, delete_as, msg, names
from tests.mongodb.test_indexes import Spy
from zaqar_delay.drivers.mongodb import fields
from zaqar_delay.drivers.mongodb import groups
from zaqar_delay.drivers.mongodb import pins
from zaqar_delay import sticky
from zaqar_delay.drivers.mongodb import queries


def pin_groups(driver, queue, project, client, count):
    """``count`` groups, each with a second message waiting (its head),
    pinned to ``client``."""
    post(driver, queue, project,
         *[msg('g%03d' % n, k) for k in (1, 2) for n in range(count)])
    taken = 0
    while taken < count:
        claim_id, got = claim_as(client, driver, queue, project, limit=10)
        delete_as(client, driver, queue, project, got, claim_id)
        taken += len(got)


def pinned_count(driver, queue, project, client=None):
    if client is None:
        return pins.count(driver, queue, project)
    return driver.pins.count_documents(
        {fields.QUEUE: queue, fields.PIN_CLIENT: client})


def test_a_claim_never_reads_heads_pinned_to_other_clients(
        driver, make_queue, project):
    queue = make_queue(STICKY)
    pin_groups(driver, queue, project, BOB, 30)
    post(driver, queue, project, msg('mine', 1))
    spy = Spy(driver.messages)
    driver.claim_controller._messages = spy
    assert names(claim_as(ALICE, driver, queue, project)[1]) == ['mine1']
    ready = [(query, hint) for query, _, _, hint in spy.finds
             if query.get('s') == fields.READY]
    assert ready
    for query, hint in ready:
        assert hint == 'zd_ready_pin'
        assert query[fields.PIN] == {'$in': [None, ALICE]}
    # Behind the index bounds: not one of Bob's 30 waiting heads.
    bob_heads = driver.messages.count_documents(
        {fields.QUEUE: queue, fields.PIN: BOB, fields.STATE: fields.READY})
    assert bob_heads == 30


def test_idle_clients_groups_are_freed_in_bounded_batches(
        driver, make_queue, project, clock, monkeypatch):
    monkeypatch.setattr(pins, 'FREE_BATCH', 4)
    queue = make_queue(STICKY)
    pin_groups(driver, queue, project, ALICE, 10)
    clock.advance(STICKY_S)
    claim_id, got = claim_as(BOB, driver, queue, project, limit=10)
    # One claim frees one batch, and takes exactly the heads it freed.
    assert len(got) == 4
    assert pinned_count(driver, queue, project, ALICE) == 6
    delete_as(BOB, driver, queue, project, got, claim_id)
    assert len(claim_as(BOB, driver, queue, project, limit=10)[1]) == 4
    assert len(claim_as(BOB, driver, queue, project, limit=10)[1]) == 2
    assert pinned_count(driver, queue, project, ALICE) == 0
    assert pinned_count(driver, queue, project, BOB) == 10
    # Alice, left with none, is forgotten by the next sweep.
    claim_as(BOB, driver, queue, project)
    assert driver.sticky_clients.find_one(
        {fields.QUEUE: queue, fields.PIN_CLIENT: ALICE}) is None


def test_an_idle_clients_waiting_group_is_freed_before_older_pins(
        driver, make_queue, project, clock, monkeypatch):
    # Alice took 10 groups that emptied since (a pin outlives its group),
    # then 'live', whose head came back to her when her claim lapsed
    # while she was active. Once she is idle, Bob's first claim gets it:
    # oldest pins first alone would free the 10 stale ones before it.
    monkeypatch.setattr(pins, 'FREE_BATCH', 4)
    queue = make_queue(STICKY)
    post(driver, queue, project, *[msg('e%d' % n, 1) for n in range(10)])
    claim_id, got = claim_as(ALICE, driver, queue, project, limit=10)
    delete_as(ALICE, driver, queue, project, got, claim_id)
    post(driver, queue, project, msg('live', 1))
    claim_as(ALICE, driver, queue, project, limit=1, ttl=30)
    clock.advance(31)
    assert claim_as(BOB, driver, queue, project) == (None, [])
    assert pinned_count(driver, queue, project, ALICE) == 11
    clock.advance(STICKY_S)
    assert names(claim_as(BOB, driver, queue, project, limit=1)[1]) == [
        'live1']


def test_a_sweep_keeps_a_pin_its_client_renewed_meanwhile(
        driver, make_queue, project, clock, monkeypatch):
    """Bob's claim starts freeing idle Alice's groups; before it deletes
    her pins, Alice claims again and takes her group back. Her fresh pin
    must survive the sweep, and her head keep it."""
    queue = make_queue(STICKY)
    post(driver, queue, project, msg('a', 1), msg('a', 2), msg('a', 3))
    claim_id, got = claim_as(ALICE, driver, queue, project)
    delete_as(ALICE, driver, queue, project, got, claim_id)
    clock.advance(STICKY_S)
    real_delete = driver.pins.delete_many
    raced = []

    def delete_after_alice_claims(where, *args, **kwargs):
        if not raced:
            raced.append(claim_as(ALICE, driver, queue, project))
        return real_delete(where, *args, **kwargs)

    monkeypatch.setattr(driver.pins, 'delete_many', delete_after_alice_claims)
    assert claim_as(BOB, driver, queue, project) == (None, [])
    assert names(raced[0][1]) == ['a2']
    monkeypatch.undo()
    group = list(next(driver.message_controller.list_groups(
        queue, project=project)))[0]
    assert group['client'] == ALICE
    delete_as(ALICE, driver, queue, project, raced[0][1], raced[0][0])
    assert claim_as(BOB, driver, queue, project) == (None, [])
    assert names(claim_as(ALICE, driver, queue, project)[1]) == ['a3']


def test_a_promotion_that_copied_a_pin_freed_meanwhile_drops_it(
        driver, make_queue, project, monkeypatch):
    """A promotion reads the group's pin, then a sweep frees it (pin and
    heads) before the promoted head is written: the head must not keep a
    pin nobody will ever free."""
    queue = make_queue(STICKY)
    post(driver, queue, project, msg('a', 1), msg('a', 2))
    claim_id, got = claim_as(ALICE, driver, queue, project)
    real_head_pin = pins.head_pin
    calls = []

    def pin_then_freed(*args):
        found = real_head_pin(*args)
        if not calls:
            calls.append(found)
            driver.message_controller.unpin_group(queue, 'a',
                                                  project=project)
        return found

    monkeypatch.setattr(pins, 'head_pin', pin_then_freed)
    delete_as(ALICE, driver, queue, project, got, claim_id)
    assert calls == [ALICE]
    monkeypatch.undo()
    head = driver.messages.find_one({fields.QUEUE: queue,
                                     fields.HEAD: '"a"'})
    assert fields.PIN not in head
    assert names(claim_as(BOB, driver, queue, project)[1]) == ['a2']


def test_stats_and_gc_free_an_idle_clients_groups(driver, make_queue,
                                                  project, clock):
    queue = make_queue(STICKY)
    pin_groups(driver, queue, project, ALICE, 3)
    assert stats(driver, queue, project)['groups_pinned'] == 3
    clock.advance(STICKY_S)
    assert 'groups_pinned' not in stats(driver, queue, project)
    other = make_queue(STICKY)
    pin_groups(driver, other, project, BOB, 2)
    clock.advance(STICKY_S)
    driver.gc()
    assert pinned_count(driver, other, project) == 0
    assert driver.messages.count_documents({fields.PIN: BOB}) == 0


def test_the_sticky_claim_query_is_two_ranges_of_its_index():
    query = queries.ready('q', 'p', 1, 'c')
    assert query.index == 'zd_ready_pin'
    assert query.filter[fields.STATE] == fields.READY
    keys, options = fields.MESSAGE_INDEXES['zd_ready_pin']
    assert [key for key, _ in keys] == ['p', 'q', fields.PIN, 'k']
    assert options == {'partialFilterExpression': {'s': 'r'}}


def test_groups_advance_unpinned_on_a_queue_never_sticky(
        driver, make_queue, project):
    queue = make_queue({'_message_group_key': 'g'})
    post(driver, queue, project, msg('a', 1), msg('a', 2))
    claim_id, got = claim(driver, queue, project)
    driver.message_controller.delete(queue, got[0]['id'], project=project,
                                     claim=claim_id)
    head = groups.advance(driver, queue, project, '"a"', driver.now())
    assert fields.PIN not in head
    assert driver.pins.count_documents({}) == 0


def test_a_delete_by_a_client_off_sticky_groups_sends_no_extra_request(
        driver, make_queue, project):
    """Zaqar sends a Client-ID with every REST delete: only deleting a
    pinned head may cost the sticky bookkeeping a request (it keeps its
    client active); any other delete costs what it costs without one."""
    if mongodb_factory.real_server_uri():
        pytest.skip('counts calls on mongomock')
    queue = make_queue()
    mc = driver.message_controller
    ids = post(driver, queue, project, 'a', 'b')
    with round_trips.mongodb_counting() as without_client:
        mc.delete(queue, ids[0], project=project)
    with sticky.acting_as(ALICE):
        with round_trips.mongodb_counting() as with_client:
            mc.delete(queue, ids[1], project=project)
    assert len(with_client) == len(without_client), (with_client,
                                                     without_client)


def test_only_a_pinned_head_makes_its_successor_look_up_the_pin(
        driver, make_queue, project, monkeypatch):
    """Posting to a group and deleting its head (which promotes the next
    member) cost no `pins` lookup on a queue that is not sticky; on a
    sticky one the successor takes the pin over."""
    looked_up = []
    original = pins.head_pin

    def head_pin(*args):
        looked_up.append(args[3])
        return original(*args)

    monkeypatch.setattr(pins, 'head_pin', head_pin)
    for metadata, client, looks_up in (({'_message_group_key': 'g'}, None,
                                        False),
                                       (STICKY, ALICE, True)):
        queue = make_queue(metadata)
        post(driver, queue, project, msg('a', 1), msg('a', 2))
        if client is None:
            claim_id, got = claim(driver, queue, project)
            driver.message_controller.delete(
                queue, got[0]['id'], project=project, claim=claim_id)
        else:
            claim_id, got = claim_as(client, driver, queue, project)
            delete_as(client, driver, queue, project, got, claim_id)
        assert bool(looked_up) == looks_up, (metadata, looked_up)
        looked_up.clear()
    # The sticky group's next member went to its client only.
    assert claim_as(BOB, driver, queue, project)[1] == []
    assert names(claim_as(ALICE, driver, queue, project)[1]) == ['a2']


def test_a_queue_no_longer_sticky_hands_out_pinned_heads_at_once(
        driver, make_queue, project, clock):
    """docs/mongodb.md, *Sticky groups*: once the queue is no longer
    sticky, claims read every ready head, pinned or not (no batch to wait
    for, no request more per claim); the pins left over count in stats
    until their clients are idle and stats or gc free them."""
    queue = make_queue(STICKY)
    pin_groups(driver, queue, project, ALICE, 3)
    driver.queue_controller.set_metadata(
        queue, {'_message_group_key': 'g'}, project=project)
    assert sorted(names(claim_as(BOB, driver, queue, project)[1])) == [
        'g0002', 'g0012', 'g0022']
    assert pinned_count(driver, queue, project, ALICE) == 3
    assert stats(driver, queue, project)['groups_pinned'] == 3
    clock.advance(STICKY_S)
    assert 'groups_pinned' not in stats(driver, queue, project)
