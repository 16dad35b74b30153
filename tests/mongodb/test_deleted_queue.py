"""MongoDB: a deleted queue's counter document is kept a day with its
last position and the reservations of writers still at work, so the
queue created again goes on from its positions; it is not one of the
store's queues meanwhile, and is kept for good once the queue holds
messages again, whoever stored them."""

from tests.contract.helpers import bodies, listed, post
from tests.contract.test_sticky import ALICE, BOB, STICKY, STICKY_S
from tests.contract.test_sticky import claim_as
from tests.contract.test_queue_stage import through_pipeline
from tests.mongodb.test_consumers import page, subscribe
from tests.mongodb.test_groups import GROUPED, msg, names
from zaqar_delay import stages
from zaqar_delay.drivers.mongodb import clock as store_clock
from zaqar_delay.drivers.mongodb import fields
from zaqar_delay.drivers.mongodb import group_moves
from zaqar_delay.drivers.mongodb import pins


def counter(driver, queue, project):
    return driver.counters.raw.find_one(fields.queue_filter(queue, project))


def ttl_monitor(driver):
    """What MongoDB's TTL monitor does with zd_counter_ttl now."""
    driver.counters.raw.delete_many(
        {'x': {'$lte': store_clock.as_date(driver.now())}})


def test_a_post_racing_the_deletion_stays_in_its_consumers_sight(
        driver, make_queue, project, monkeypatch):
    """A post reserved its position; the queue was deleted and created
    again, posted to and read by its consumer; then the post stored its
    message. The kept counter had lost the post's reservation, so the
    consumer read past its position and never got the message."""
    queue = make_queue()
    consume_id, _ = subscribe(driver, queue, project)
    messages = driver.message_controller
    insert_docs, deleted, read_meanwhile = messages._insert_docs, [], []

    def deleted_between_reserve_and_insert(*args, **kwargs):
        if not deleted:
            deleted.append(True)
            messages._purge_queue(queue, project)
            post(driver, queue, project, 'x')
            read_meanwhile.append(page(driver, queue, project, consume_id))
        return insert_docs(*args, **kwargs)

    monkeypatch.setattr(messages, '_insert_docs',
                        deleted_between_reserve_and_insert)
    post(driver, queue, project, 'p')
    monkeypatch.undo()
    got, marker = read_meanwhile[0]
    again, _ = page(driver, queue, project, consume_id, marker=marker)
    assert sorted(bodies(got) + bodies(again)) == ['p', 'x']


def test_a_move_landing_in_a_deleted_target_keeps_its_counter(
        driver, project, clock, monkeypatch):
    """A move landed at the positions it reserved before its target was
    deleted and created again, taking none: the counter kept the
    deletion's expiry, and a day later the TTL monitor removed it while
    the target held the group (gc no longer visited the target, and its
    positions started again below the group's)."""
    driver.queue_controller.create('q', metadata=GROUPED, project=project)
    driver.queue_controller.create('t', metadata=GROUPED, project=project)
    post(driver, 't', project, msg('t', 0))
    post(driver, 'q', project, msg('a', 1), msg('a', 2), msg('a', 3),
         ttl=3 * 86400)
    land, deleted = group_moves._land, []

    def target_deleted_and_created_again(*args, **kwargs):
        if not deleted:
            deleted.append(True)
            through_pipeline(driver).delete('t', project=project)
            driver.queue_controller.create('t', metadata=GROUPED,
                                           project=project)
        return land(*args, **kwargs)

    monkeypatch.setattr(group_moves, '_land',
                        target_deleted_and_created_again)
    assert driver.message_controller.move_group('q', 'a', 't',
                                                project=project) == 3
    monkeypatch.undo()
    driver.gc()
    assert counter(driver, 't', project).get('x') is None
    clock.advance(86400 + 60)
    ttl_monitor(driver)
    assert (project, 't') in set(driver.queues())
    post(driver, 't', project, msg('a', 4), ttl=3600)
    assert names(listed(driver, 't', project)) == ['a1', 'a2', 'a3', 'a4']


def test_a_deleted_queue_is_not_one_of_the_stores_queues(driver, project,
                                                         clock):
    """driver.queues() (the metrics exporter's list) named a deleted
    queue for the day its counter is kept; gc passes over it."""
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a')
    stages.QueueStage(driver, None).delete('q', project=project)
    assert (project, 'q') not in set(driver.queues())
    driver.gc()
    assert counter(driver, 'q', project)['x'] is not None
    clock.advance(86400 + 60)
    ttl_monitor(driver)
    assert counter(driver, 'q', project) is None


def test_a_sticky_claim_racing_the_deletion_leaves_no_pin(
        driver, project, clock, monkeypatch):
    """Alice's claim had its message when the queue was deleted (its
    pins and clients with it) and created again, then wrote its pin: a
    pin with no client document, which no idle sweep frees, so the
    group stayed Alice's in the queue created again and Bob never got
    its messages."""
    queues = through_pipeline(driver)
    queues.create('q', metadata=STICKY, project=project)
    post(driver, 'q', project, msg('a', 1))
    pin, deleted = pins.pin, []

    def deleted_and_created_again_first(*args, **kwargs):
        if not deleted:
            deleted.append(True)
            queues.delete('q', project=project)
            queues.create('q', metadata=STICKY, project=project)
        return pin(*args, **kwargs)

    monkeypatch.setattr(pins, 'pin', deleted_and_created_again_first)
    claim_as(ALICE, driver, 'q', project)
    monkeypatch.undo()
    clock.advance(2 * STICKY_S)
    post(driver, 'q', project, msg('a', 2))
    assert names(claim_as(BOB, driver, 'q', project)[1]) == ['a2']
    assert pins.count(driver, 'q', project) == 1
