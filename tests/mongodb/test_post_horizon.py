"""MongoDB: persistent reads stop before positions a post is still storing
(issue 11, drivers/mongodb/reservations.py).

A post reserves its positions, then inserts; while two run at once, the
later one's messages can be stored first. A persistent consumer must not
move past the earlier one's positions (it would never get them), and
read-by-all must not remove them before every consumer has. Every test
here runs on mongomock and, with ZAQAR_DELAY_TEST_MONGODB_URI set, on a
real server (threads become processes there).
"""

import json
import random
import time

import pytest
from pymongo import errors as mongo_errors

from tests.contract.helpers import bodies, listed, post
from tests.contract.test_retention import operator
from tests.mongodb import workers
from tests.mongodb.test_consumers import counter, page, subscribe
from tests.mongodb.test_races import before_call
from zaqar_delay import errors
from zaqar_delay.drivers.mongodb import fields


def reserved(driver, queue, project):
    """The queue's recorded reservations, {token: {s, a}}."""
    return (counter(driver, queue, project) or {}).get(
        fields.RESERVATIONS, {})


def inserting(*names):
    """An ``insert_many`` filter: the post of exactly ``names``."""
    def when(docs, *args, **kwargs):
        return [json.loads(doc[fields.BODY]) for doc in docs] == list(names)
    return when


def read_all(driver, queue, project, consume_id):
    """Read pages as ``consume_id`` until one is empty, acknowledging
    each with the next listing; the bodies got, in order."""
    got, marker = [], None
    while True:
        messages, marker = page(driver, queue, project, consume_id, marker)
        if not messages:
            return got
        got += bodies(messages)


def lost(driver, queue, project):
    found = driver.message_controller.list_consumers(queue, project)[1]
    return [consumer.lost for consumer in found]


@operator(consumers_required=2)
def test_a_consumer_waits_for_a_post_still_storing(driver, make_queue,
                                                  project, monkeypatch):
    queue = make_queue()
    first, _ = subscribe(driver, queue, project)
    second, _ = subscribe(driver, queue, project)
    post(driver, queue, project, 'x')
    assert read_all(driver, queue, project, first) == ['x']
    seen = {}

    def meanwhile():
        # Post A has its positions and has not stored them; B runs whole.
        post(driver, queue, project, 'b1', 'b2')
        seen['first'] = read_all(driver, queue, project, first)
        seen['second'] = read_all(driver, queue, project, second)
        seen['cleaned'] = driver.message_controller.clean(queue, project,
                                                          100)
        seen['reserved'] = len(reserved(driver, queue, project))

    fired = before_call(monkeypatch, driver.messages, 'insert_many',
                        meanwhile, inserting('a1', 'a2'))
    post(driver, queue, project, 'a1', 'a2')
    assert fired
    # Neither consumer went past A's positions: B's messages, stored
    # beyond them, waited too, and nothing of A's could be removed.
    # x, read by both, went; the cut stayed on it.
    assert seen == {'first': [], 'second': ['x'], 'cleaned': (1, False),
                    'reserved': 1}
    assert counter(driver, queue, project)[fields.READ_FLOOR] == 1
    assert reserved(driver, queue, project) == {}
    assert read_all(driver, queue, project, first) == ['a1', 'a2', 'b1',
                                                       'b2']
    # One consumer read them: read-by-all (two required) keeps them.
    driver.message_controller.clean(queue, project, 100)
    assert bodies(listed(driver, queue, project)) == ['a1', 'a2', 'b1',
                                                      'b2']
    assert read_all(driver, queue, project, second) == ['a1', 'a2', 'b1',
                                                        'b2']
    assert driver.message_controller.clean(queue, project, 100)[0] == 4
    assert lost(driver, queue, project) == [0, 0]


def test_other_reads_do_not_wait(driver, make_queue, project, monkeypatch):
    queue = make_queue()
    seen = {}

    def meanwhile():
        post(driver, queue, project, 'b')
        seen['listed'] = bodies(listed(driver, queue, project))

    before_call(monkeypatch, driver.messages, 'insert_many', meanwhile,
                inserting('a'))
    post(driver, queue, project, 'a')
    assert seen == {'listed': ['b']}


@operator(consumers_required=0)
def test_read_all_stops_before_a_post_still_storing(driver, make_queue,
                                                   project, monkeypatch):
    queue = make_queue()
    post(driver, queue, project, 'x')
    floors = []

    def meanwhile():
        post(driver, queue, project, 'b')
        listed(driver, queue, project)
        floors.append(counter(driver, queue, project)[fields.READ_FLOOR])

    before_call(monkeypatch, driver.messages, 'insert_many', meanwhile,
                inserting('a'))
    post(driver, queue, project, 'a')
    # The cut stayed on x (position 1): a (2) was not stored yet.
    assert floors == [1]


def test_a_post_without_a_reply_holds_readers_until_stale(
        driver, make_queue, project, monkeypatch, clock):
    queue = make_queue()
    consume_id, _ = subscribe(driver, queue, project)
    original = driver.messages.insert_many

    def reply_lost(docs, *args, **kwargs):
        if json.loads(docs[0][fields.BODY]) == 'a':
            original(docs, *args, **kwargs)
            raise errors.BackendUnavailable(backend='MongoDB',
                                            reason='reply lost')
        return original(docs, *args, **kwargs)

    monkeypatch.setattr(driver.messages, 'insert_many', reply_lost)
    with pytest.raises(errors.BackendUnavailable):
        post(driver, queue, project, 'a')
    post(driver, queue, project, 'b')
    # The insert may still be running on the server: a waits, b behind it.
    assert read_all(driver, queue, project, consume_id) == []
    timeout = driver.store_conf.reservation_timeout
    clock.advance(timeout - 1)
    driver.gc()
    assert len(reserved(driver, queue, project)) == 1
    assert read_all(driver, queue, project, consume_id) == []
    clock.advance(1)
    # Stale: it no longer holds the consumer back, and gc forgets it.
    assert read_all(driver, queue, project, consume_id) == ['a', 'b']
    driver.gc()
    assert reserved(driver, queue, project) == {}


def test_a_post_that_died_after_reserving_does_not_pin_forever(
        driver, make_queue, project, monkeypatch, clock):
    queue = make_queue()
    consume_id, _ = subscribe(driver, queue, project)

    def die(*args, **kwargs):
        raise errors.BackendUnavailable(backend='MongoDB', reason='died')

    monkeypatch.setattr(driver.messages, 'insert_many', die)
    with pytest.raises(errors.BackendUnavailable):
        post(driver, queue, project, 'a')
    monkeypatch.undo()
    post(driver, queue, project, 'b')
    assert read_all(driver, queue, project, consume_id) == []
    clock.advance(driver.store_conf.reservation_timeout)
    assert read_all(driver, queue, project, consume_id) == ['b']


def test_a_retried_insert_stores_once_and_releases(driver, make_queue,
                                                   project, monkeypatch):
    # pymongo's retryable writes send an insert again after a lost reply;
    # what the first one stored comes back as duplicate ids.
    queue = make_queue()
    consume_id, _ = subscribe(driver, queue, project)
    original = driver.messages.insert_many
    sent = []

    def twice(docs, *args, **kwargs):
        sent.append(len(docs))
        original(docs, *args, **kwargs)
        return original(docs, *args, **kwargs)

    monkeypatch.setattr(driver.messages, 'insert_many', twice)
    ids = post(driver, queue, project, 'a', 'b')
    assert sent == [2]
    assert reserved(driver, queue, project) == {}
    assert driver.messages.raw.count_documents(
        fields.queue_filter(queue, project)) == 2
    assert read_all(driver, queue, project, consume_id) == ['a', 'b']
    assert [m['id'] for m in listed(driver, queue, project)] == ids


def test_a_post_whose_release_loses_its_reply_still_succeeds(
        driver, make_queue, project, monkeypatch):
    queue = make_queue()
    consume_id, _ = subscribe(driver, queue, project)
    original = driver.counters.update_one

    def release_lost(where, change, *args, **kwargs):
        result = original(where, change, *args, **kwargs)
        if '$unset' in change:
            raise errors.BackendUnavailable(backend='MongoDB',
                                            reason='reply lost')
        return result

    monkeypatch.setattr(driver.counters, 'update_one', release_lost)
    post(driver, queue, project, 'a')
    monkeypatch.undo()
    assert driver.messages.raw.count_documents(
        fields.queue_filter(queue, project)) == 1
    assert read_all(driver, queue, project, consume_id) == ['a']


def test_a_refused_insert_releases_what_it_could_not_store(
        driver, make_queue, project, monkeypatch):
    queue = make_queue()
    consume_id, _ = subscribe(driver, queue, project)

    def refused(docs, *args, **kwargs):
        raise mongo_errors.BulkWriteError({'writeErrors': [
            {'index': 0, 'code': 2, 'errmsg': 'refused'}]})

    monkeypatch.setattr(driver.messages, 'insert_many', refused)
    with pytest.raises(errors.BackendUnavailable):
        post(driver, queue, project, 'a')
    monkeypatch.undo()
    assert reserved(driver, queue, project) == {}
    post(driver, queue, project, 'b')
    assert read_all(driver, queue, project, consume_id) == ['b']


def test_dead_letters_and_group_moves_release_their_positions(
        driver, project, clock):
    driver.queue_controller.create(
        'q', metadata={'_max_claim_count': 1, '_dead_letter_queue': 'dlq'},
        project=project)
    post(driver, 'q', project, 'a')
    driver.claim_controller.create('q', {'ttl': 10, 'grace': 0},
                                   project=project)
    clock.advance(11)
    driver.claim_controller.create('q', {'ttl': 10, 'grace': 0},
                                   project=project)
    assert bodies(listed(driver, 'dlq', project)) == ['a']
    grouped = {'_message_group_key': 'g'}
    driver.queue_controller.create('g', metadata=grouped, project=project)
    driver.queue_controller.create('t', metadata=grouped, project=project)
    post(driver, 'g', project, {'g': 'x', 'n': 1}, {'g': 'x', 'n': 2})
    assert driver.message_controller.move_group('g', 'x', 't',
                                                project=project) == 2
    for queue in ('q', 'dlq', 'g', 't'):
        assert reserved(driver, queue, project) == {}


@pytest.mark.usefixtures('busy_switching')
@pytest.mark.parametrize('posters, limit', [
    ([('produce', 50)] * 8, 100),
    # Half the posts run their store call twice at once (a post and its
    # retry, racing): the positions the loser gives up are not lost
    # (issue 19, given_up.py). Small pages: gaps fall at page starts.
    ([('produce_retried', 30), ('produce', 30)] * 2, 7),
], ids=['posts', 'posts-and-racing-retries'])
def test_concurrent_posters_and_a_persistent_consumer(
        driver, make_queue, project, real, monkeypatch, posters, limit):
    queue = make_queue()
    consume_id, _ = subscribe(driver, queue, project)
    # Inserts of random speed (threads; processes on a real server have
    # the network in between): posts overtake one another between their
    # reserve and their insert, while the consumer, reading large pages,
    # stays at the head of the queue.
    original = driver.messages.insert_many

    def slow(*args, **kwargs):
        time.sleep(random.random() * 0.02)
        return original(*args, **kwargs)

    monkeypatch.setattr(driver.messages, 'insert_many', slow)
    total = sum(count for _, count in posters)
    # A skipped message never comes: the reader stops at an empty page
    # once all are stored instead of waiting for it forever.
    jobs = [(role, (queue, project, count)) for role, count in posters] + [
        ('read_feed', (queue, project, consume_id, total, 20000, limit,
                       True))]
    results = workers.run_mixed(jobs, driver, real)
    posted = [mid for ids in results[:len(posters)] for mid in ids]
    got = results[len(posters)]
    # Every message, none skipped (at least once; a page is handed again
    # only after a consumer dies, so here exactly once), none lost.
    assert sorted(got) == sorted(posted) and len(got) == len(posted)
    assert lost(driver, queue, project) == [0]
