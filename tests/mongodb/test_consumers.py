"""Persistent consumers on MongoDB (issue 11): the layout (state in the
subscription document, the read-by-all floor in the counter), an update
racing a delete, expiry with the subscription. Updates under
concurrency and read-by-all while producers, consumers and cleaners run
are in tests/multiprocess/test_consumers.py."""

import uuid

from tests import consumer_helpers
from tests.contract.helpers import bodies, listed, post
from tests.contract.test_retention import operator
from tests.mongodb.examined import Examined
from tests.mongodb.test_races import before_call
from tests.mongodb.test_round_trips import second_node
from zaqar_delay import consumers
from zaqar_delay.drivers.mongodb import connection
from zaqar_delay.drivers.mongodb import consumers as consumer_state
from zaqar_delay.drivers.mongodb import fields


def subscribe(driver, queue, project, consume_id=None, ttl=3600):
    consume_id = str(consume_id or uuid.uuid4())
    sid = driver.subscription_controller.create(
        queue, consumers.PREFIX + consume_id, ttl, {}, project=project)
    assert sid
    return consume_id, sid


def page(driver, queue, project, consume_id, marker=None, limit=10):
    pages = driver.message_controller.list(
        queue, project=project, marker=marker, limit=limit,
        client_uuid=consume_id)
    return list(next(pages)), next(pages)


def counter(driver, queue, project):
    return driver.counters.find_one(fields.queue_filter(queue, project))


def test_state_lives_in_the_subscription_document(driver, make_queue,
                                                  project, clock):
    queue = make_queue()
    consume_id, sid = subscribe(driver, queue, project)
    doc = driver.subscriptions.find_one({'_id': sid})
    assert doc[consumer_state.ACTIVE] == driver.now()
    assert not set(consumer_state.STATE) & set(doc)
    post(driver, queue, project, 'a', 'b', 'c')
    clock.advance(5)
    got, marker = page(driver, queue, project, consume_id, limit=2)
    page(driver, queue, project, consume_id, marker)
    doc = driver.subscriptions.find_one({'_id': sid})
    positions = [m.position for m in listed(driver, queue, project)]
    assert doc[consumer_state.CURSOR] == got[-1].position == int(marker)
    assert doc[consumer_state.HANDED] == positions[-1]
    assert doc[consumer_state.ACTIVE] == driver.now()
    assert doc.get(consumer_state.LOST, 0) == 0


def test_changing_the_subscriber_resets_the_state(driver, make_queue,
                                                  project):
    queue = make_queue()
    consume_id, sid = subscribe(driver, queue, project)
    post(driver, queue, project, 'a')
    _, marker = page(driver, queue, project, consume_id)
    page(driver, queue, project, consume_id, marker)
    other = str(uuid.uuid4())
    driver.subscription_controller.update(
        queue, sid, project=project, subscriber=consumers.PREFIX + other)
    doc = driver.subscriptions.find_one({'_id': sid})
    assert not set(consumer_state.STATE) & set(doc)
    state = driver.message_controller.list_consumers(queue, project)[1]
    assert [(c.consume_id, c.cursor, c.handed) for c in state] == [
        (other, None, None)]


def test_the_consumer_expires_with_its_subscription(driver, make_queue,
                                                    project, clock):
    queue = make_queue({'_retention': {'consumers_required': 1}})
    consume_id, _ = subscribe(driver, queue, project, ttl=10)
    post(driver, queue, project, 'a', 'b')
    _, marker = page(driver, queue, project, consume_id, limit=1)
    clock.advance(11)
    assert driver.message_controller.list_consumers(queue, project)[1] == []
    # Not a consumer any more: its Client-ID lists as any client's (from
    # the start, not after its cursor), and its acknowledgement removes
    # nothing.
    got, _ = page(driver, queue, project, consume_id)
    assert bodies(got) == ['a', 'b']
    assert bodies(listed(driver, queue, project)) == ['a', 'b']
    # Subscribing again (the expired subscription frees its URI) starts
    # afresh.
    subscribe(driver, queue, project, consume_id)
    found = driver.message_controller.list_consumers(queue, project)[1]
    assert [(c.cursor, c.handed, c.lost) for c in found] == [(None, None,
                                                              0)]


def test_an_update_racing_a_delete_does_not_bring_the_consumer_back(
        driver, make_queue, project, monkeypatch):
    queue = make_queue()
    consume_id, sid = subscribe(driver, queue, project)
    post(driver, queue, project, 'a')

    def unsubscribe():
        driver.subscription_controller.delete(queue, sid, project=project)

    fired = before_call(monkeypatch, driver.subscriptions, 'update_one',
                        unsubscribe)
    driver.message_controller._consumer_update(queue, project, consume_id,
                                               None, 5, 0)
    assert fired
    assert driver.subscriptions.find_one({'_id': sid}) is None
    assert driver.message_controller.list_consumers(queue, project)[1] == []


@operator(consumers_required=0)
def test_read_all_never_covers_later_posts(driver, make_queue, project):
    queue = make_queue()
    post(driver, queue, project, 'a', 'b')
    assert bodies(listed(driver, queue, project)) == []
    last = counter(driver, queue, project)['n']
    assert counter(driver, queue, project)[fields.READ_FLOOR] == last
    consume_id, _ = subscribe(driver, queue, project)
    post(driver, queue, project, 'c')
    got, _ = page(driver, queue, project, consume_id)
    assert bodies(got) == ['c']
    assert counter(driver, queue, project)[fields.READ_FLOOR] == last


@operator(consumers_required=1)
def test_cleanup_removes_what_all_read_in_bounded_batches(
        driver, make_queue, project):
    queue = make_queue()
    consume_id, _ = subscribe(driver, queue, project)
    post(driver, queue, project, *range(12))
    _, marker = page(driver, queue, project, consume_id, limit=10)
    page(driver, queue, project, consume_id, marker, limit=1)
    counts = []
    while True:
        removed, more = driver.message_controller.clean(queue, project, 4)
        counts.append(removed)
        if not more:
            break
    # A page's read settles one batch first: what is left goes 4 by 4.
    assert all(count <= 4 for count in counts) and len(counts) >= 2
    assert driver.messages.raw.count_documents(
        fields.queue_filter(queue, project)) == 2
    stats = driver.message_controller.stats(queue, project)
    assert stats['retention']['removed'] == 10


def test_the_cursor_survives_a_restart_of_the_api_node(
        driver, conf, redis_url, make_queue, project):
    # SPEC §5: a consumer resumes right after its cursor after a restart.
    # The cursor lives in MongoDB, so a new driver (a restarted API node,
    # nothing in its memory) on the same database resumes it; a restart
    # of the server itself needs a real one (ZAQAR_DELAY_TEST_MONGODB_URI
    # runs this against it, but cannot restart it).
    queue = make_queue()
    consume_id, sid = subscribe(driver, queue, project)
    post(driver, queue, project, *range(5))
    _, marker = page(driver, queue, project, consume_id, limit=2)
    page(driver, queue, project, consume_id, marker=marker, limit=1)
    restarted = second_node(driver, conf, redis_url)
    got, _ = page(restarted, queue, project, consume_id)
    assert bodies(got) == [2, 3, 4]
    doc = restarted.subscriptions.find_one({'_id': sid})
    assert doc.get(consumer_state.LOST, 0) == 0


def acknowledge(driver, queue, project, consume_id, position):
    driver.message_controller._consumer_update(queue, project, consume_id,
                                               position, None, 0)


def test_live_readers_come_from_indexes_not_from_every_consumer(
        driver, make_queue, project, clock, monkeypatch):
    """A claim on a queue with consumers_required, and every stats call,
    need the live consumers' count and lowest cursor: two counts and a
    one-document probe of the consumer indexes, the same whether the
    queue has 3 or 60 consumers (the default read every consumer's
    document). Checked against that default on live, idle, cursorless
    and expired consumers."""
    queue = make_queue({'_retention': {'consumers_required': 1}})
    post(driver, queue, project, *range(5))
    idle_s = driver.message_controller._idle_s
    sleepers = [subscribe(driver, queue, project, ttl=2 * idle_s)[0]
                for _ in range(3)]
    for consume_id in sleepers:
        acknowledge(driver, queue, project, consume_id, 0)
    clock.advance(idle_s + 1)
    subscribe(driver, queue, project, ttl=1)       # expires below
    readers = []
    for ack in (3, 1, None):
        consume_id = subscribe(driver, queue, project)[0]
        if ack is not None:
            acknowledge(driver, queue, project, consume_id, ack)
        readers.append(consume_id)
    clock.advance(2)

    def both():
        default = super(type(driver.message_controller),
                        driver.message_controller)._live_readers(queue,
                                                                 project)
        return driver.message_controller._live_readers(queue,
                                                       project), default

    assert both() == ((3, -1, 3), (3, -1, 3))
    acknowledge(driver, queue, project, readers[2], 2)
    assert both() == ((3, 1, 3), (3, 1, 3))
    # What claims ask (with_readers): the idle ones are not counted.
    assert driver.message_controller._live_readers(
        queue, project, idle=False) == (3, 1, None)
    returned = []
    real_find = driver.subscriptions.find
    monkeypatch.setattr(driver.subscriptions, 'find', lambda *a, **k: (
        returned.append(len(found := real_find(*a, **k))) or found))
    for _ in range(60):
        subscribe(driver, queue, project)
    returned.clear()
    driver.message_controller.stats(queue, project=project)
    # Twice one probe: for what retention keeps, and for the report.
    assert returned == [1, 1]


def test_a_page_read_before_a_deletion_skips_nothing_of_the_queue_again(
        driver, make_queue, project, monkeypatch):
    """A consumer's page listed the queue, which was then deleted,
    created again and posted to before the page stored the consumer's
    cursor. Positions started again from 1, so the old cursor (3) was
    past the new queue's first three messages: the consumer skipped
    them. Positions now go on across the deletion, the counter kept a
    day unless the queue is posted to again."""
    queue = make_queue()
    consume_id, _ = subscribe(driver, queue, project)
    post(driver, queue, project, 'a', 'b', 'c')
    _, marker = page(driver, queue, project, consume_id, limit=3)
    messages = driver.message_controller
    update, again, kept = messages._consumer_update, [], []

    def queue_created_again_first(*args):
        if not again:
            again.append(True)
            messages._purge_queue(queue, project)
            kept.append((counter(driver, queue, project) or {}).get('x'))
            post(driver, queue, project, 'x', 'y', 'z', 'w')
        return update(*args)

    monkeypatch.setattr(messages, '_consumer_update',
                        queue_created_again_first)
    page(driver, queue, project, consume_id, marker=marker)
    monkeypatch.undo()
    got, _ = page(driver, queue, project, consume_id)
    assert bodies(got) == ['x', 'y', 'z', 'w']
    # Kept a day by the deletion, for good once posted to again.
    assert kept[0] is not None
    assert counter(driver, queue, project)['x'] is None


def test_a_queue_deletion_resets_its_consumers_a_batch_per_request(
        driver, make_queue, project, monkeypatch):
    """Zaqar does not bound subscriptions: deleting a queue resets its
    consumers' cursors RESTART_BATCH (here 4) per update, not all of
    them in one."""
    monkeypatch.setattr(consumer_state, 'RESTART_BATCH', 4)
    queue = make_queue()
    post(driver, queue, project, 'a')
    readers = [subscribe(driver, queue, project)[0] for _ in range(10)]
    for consume_id in readers:
        acknowledge(driver, queue, project, consume_id, 1)
    updated = []
    real = driver.subscriptions.update_many

    def counting(where, change, *args, **kwargs):
        result = real(where, change, *args, **kwargs)
        updated.append(result.modified_count)
        return result

    monkeypatch.setattr(driver.subscriptions, 'update_many', counting)
    driver.message_controller._purge_queue(queue, project)
    assert updated == [4, 4, 2]
    assert all(consumer_state.one(driver, queue, project, c)[1].cursor
               is None for c in readers)


def test_a_poll_behind_a_delayed_head_examines_about_a_page(
        driver, project, clock, monkeypatch):
    """docs/usage.md: a poll behind a delayed message reads one page of
    the queue, whatever waits behind it (as on Redis and Swift). The
    consumer gets an empty page, stopping before the delayed head, and
    the reads examine about a page, not the 1,000 delayed behind it."""
    consumer_helpers.behind_a_delayed_run(driver, project, 1000, 100)
    examined = Examined(monkeypatch)
    # Examined counts hinted finds: an unhinted one must not slip by.
    unhinted = []
    counted_find = connection.GuardedCollection.find

    def find(coll, query, projection=None, sort=None, limit=0, hint=None,
             skip=0):
        if coll.raw.name == fields.MESSAGES and not hint:
            unhinted.append(query)
        return counted_find(coll, query, projection, sort, limit, hint,
                            skip)

    monkeypatch.setattr(connection.GuardedCollection, 'find', find)
    reader = consumer_helpers.A
    assert consumer_helpers.page(driver, project, reader) == ([], None)
    assert unhinted == []
    # The page's own read, by position, was among those counted.
    assert 'zd_position' in [hint for _, hint, _ in examined.finds]
    assert examined.total <= 30, examined.finds
    clock.advance(61)
    got, _ = consumer_helpers.page(driver, project, reader, limit=5)
    assert bodies(got) == [0, 1, 2, 3, 4]
