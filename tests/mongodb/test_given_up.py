"""MongoDB: a position its writer reserved and left empty is never counted
as lost (issue 19, item 1; drivers/mongodb/given_up.py).

Each test reads a message first, so that its consumer has been handed a
position and its next page counts the positions it skips; then a writer
leaves positions empty, and the consumer reads on past them.
"""

import pytest

from tests.contract.helpers import bodies, claim, post
from tests.mongodb.test_consumers import page, subscribe
from tests.mongodb.test_post_horizon import read_all
from tests.mongodb.test_races import before_call
from zaqar_delay import errors
from zaqar_delay import rules
from zaqar_delay.drivers.mongodb import fields
from zaqar_delay.drivers.mongodb import given_up as given_up_module


def lost(driver, queue, project, consume_id):
    return driver.message_controller._consumer(queue, project,
                                               consume_id)[1].lost


def given_up(driver, queue, project):
    return sorted(doc[fields.POSITION] for doc in driver.given_up.raw.find(
        fields.queue_filter(queue, project)))


def last_position(driver, queue, project):
    return driver.counters.find_one(fields.queue_filter(queue, project))['n']


def posted_twice(driver, monkeypatch, queue, project, *names):
    """Post ``names`` with the store call run twice, as a retry after a
    lost reply runs it; their ids."""
    store = driver.message_controller._insert

    def stored_twice(*args):
        store(*args)
        store(*args)

    monkeypatch.setattr(driver.message_controller, '_insert', stored_twice)
    ids = post(driver, queue, project, *names)
    monkeypatch.undo()
    return ids


def died_after_reserving(driver, monkeypatch, queue, project, *names):
    """Post ``names`` from a writer that dies once it has reserved."""
    def die(*args, **kwargs):
        raise errors.BackendUnavailable(backend='MongoDB', reason='died')

    monkeypatch.setattr(driver.messages, 'insert_many', die)
    with pytest.raises(errors.BackendUnavailable):
        post(driver, queue, project, *names)
    monkeypatch.undo()


@pytest.fixture
def reading(driver, make_queue, project):
    """(queue, consume_id): a queue whose consumer read ``first``."""
    queue = make_queue()
    consume_id, _ = subscribe(driver, queue, project)
    post(driver, queue, project, 'first')
    assert read_all(driver, queue, project, consume_id) == ['first']
    return queue, consume_id


def test_two_racing_posts_of_the_same_ids_lose_nothing(
        driver, project, monkeypatch, reading):
    # A post and its retry at once: both reserve, the retry stores, and
    # the first finds its ids stored and leaves its positions empty.
    queue, consume_id = reading
    messages = rules.prepare_messages(
        [{'body': 'a', 'ttl': 300}, {'body': 'b', 'ttl': 300}],
        driver.message_controller.policy(queue, project), 0, 1209600)
    insert = driver.message_controller._insert
    before_call(monkeypatch, driver.messages, 'insert_many',
                lambda: insert(queue, project, messages, 'c'))
    insert(queue, project, messages, 'c')
    monkeypatch.undo()
    post(driver, queue, project, 'c')
    assert given_up(driver, queue, project) == [2, 3]
    assert read_all(driver, queue, project, consume_id) == ['a', 'b', 'c']
    assert lost(driver, queue, project, consume_id) == 0


def test_a_real_loss_next_to_given_up_positions_still_counts(
        driver, project, monkeypatch, reading):
    queue, consume_id = reading
    posted_twice(driver, monkeypatch, queue, project, 'a')
    [gone] = post(driver, queue, project, 'deleted')
    post(driver, queue, project, 'b')
    got, marker = page(driver, queue, project, consume_id, limit=1)
    assert bodies(got) == ['a']
    driver.message_controller.delete(queue, gone, project=project)
    # The page after 'a' skips the retry's empty position and 'deleted':
    # only the deleted message is lost.
    got, marker = page(driver, queue, project, consume_id, marker)
    assert bodies(got) == ['b']
    assert lost(driver, queue, project, consume_id) == 1


def test_a_rerun_carry_in_takes_no_position(driver, project, reading):
    queue, consume_id = reading
    messages = rules.prepare_messages(
        [{'body': 'a', 'ttl': 300}], driver.message_controller.policy(
            queue, project), 0, 1209600)
    controller = driver.message_controller
    controller.carry_in(queue, project, messages, 'c')
    taken = last_position(driver, queue, project)
    controller.carry_in(queue, project, messages, 'c')
    assert last_position(driver, queue, project) == taken
    assert given_up(driver, queue, project) == []
    assert read_all(driver, queue, project, consume_id) == ['a']


def test_a_dead_letter_deleted_before_its_move_is_not_lost(
        driver, project, monkeypatch, clock):
    driver.queue_controller.create(
        'q', metadata={'_max_claim_count': 1, '_dead_letter_queue': 'dlq'},
        project=project)
    driver.queue_controller.create('dlq', project=project)
    consume_id, _ = subscribe(driver, 'dlq', project)
    post(driver, 'dlq', project, 'first')
    assert read_all(driver, 'dlq', project, consume_id) == ['first']
    gone, _ = post(driver, 'q', project, 'a', 'b')
    claim_id, _ = claim(driver, 'q', project, ttl=10)
    clock.advance(11)

    def deleted_meanwhile():
        driver.messages.raw.delete_one({'_id': gone})

    # Just before the first message of the batch moves.
    before_call(monkeypatch, driver.messages, 'update_one',
                deleted_meanwhile,
                lambda where, *a, **k: where.get('_id') == gone)
    assert claim(driver, 'q', project, ttl=10) == (None, [])
    monkeypatch.undo()
    assert read_all(driver, 'dlq', project, consume_id) == ['b']
    assert lost(driver, 'dlq', project, consume_id) == 0


def test_an_aborted_group_move_is_not_lost_in_its_target(
        driver, project, monkeypatch):
    grouped = {'_message_group_key': 'g'}
    driver.queue_controller.create('g', metadata=grouped, project=project)
    driver.queue_controller.create('t', project=project)
    consume_id, _ = subscribe(driver, 't', project)
    post(driver, 't', project, 'first')
    assert read_all(driver, 't', project, consume_id) == ['first']
    post(driver, 'g', project, {'g': 'x', 'n': 1}, {'g': 'x', 'n': 2})

    def claimed_meanwhile():
        monkeypatch.undo()
        claim(driver, 'g', project)

    # The head is claimed between the target's reservation and its freeze.
    before_call(monkeypatch, driver.messages, 'update_one',
                claimed_meanwhile,
                lambda where, *a, **k: fields.HEAD in where)
    with pytest.raises(errors.GroupInFlight):
        driver.message_controller.move_group('g', 'x', 't', project=project)
    post(driver, 't', project, 'after')
    assert given_up(driver, 't', project) == [2, 3]
    assert read_all(driver, 't', project, consume_id) == ['after']
    assert lost(driver, 't', project, consume_id) == 0


def test_a_post_that_died_after_reserving_is_not_lost(
        driver, project, monkeypatch, clock, reading):
    # Its reservation goes stale; the consumer's page gives it back
    # (what it left empty is given up) before reading past it.
    queue, consume_id = reading
    died_after_reserving(driver, monkeypatch, queue, project, 'a', 'b')
    post(driver, queue, project, 'c')
    assert read_all(driver, queue, project, consume_id) == []
    clock.advance(driver.store_conf.reservation_timeout)
    assert read_all(driver, queue, project, consume_id) == ['c']
    assert lost(driver, queue, project, consume_id) == 0


def test_gc_forgets_what_no_consumer_can_count_any_more(
        driver, make_queue, project, monkeypatch):
    # Kept while a consumer has not read past it, or a message stored
    # before it (a new consumer's first page may start there).
    queue = make_queue()
    slow, _ = subscribe(driver, queue, project)
    fast, _ = subscribe(driver, queue, project)
    [first] = post(driver, queue, project, 'first')
    for consume_id in (slow, fast):
        assert read_all(driver, queue, project, consume_id) == ['first']
    [a] = posted_twice(driver, monkeypatch, queue, project, 'a')
    post(driver, queue, project, 'b')
    assert given_up(driver, queue, project) == [3]
    assert read_all(driver, queue, project, fast) == ['a', 'b']
    driver.gc()
    assert given_up(driver, queue, project) == [3]
    assert read_all(driver, queue, project, slow) == ['a', 'b']
    assert lost(driver, queue, project, slow) == 0
    driver.gc()
    assert given_up(driver, queue, project) == [3]
    driver.message_controller.bulk_delete(queue, [first, a],
                                          project=project)
    driver.gc()
    assert given_up(driver, queue, project) == []


def test_a_purged_queue_forgets_its_given_up_positions(
        driver, project, monkeypatch, reading):
    queue, _ = reading
    posted_twice(driver, monkeypatch, queue, project, 'a')
    assert given_up(driver, queue, project) == [3]
    driver.message_controller._purge_queue(queue, project)
    assert given_up(driver, queue, project) == []


def test_gc_gives_back_a_dead_posts_positions(
        driver, project, monkeypatch, clock, reading):
    queue, consume_id = reading
    died_after_reserving(driver, monkeypatch, queue, project, 'a', 'b')
    post(driver, queue, project, 'c')
    clock.advance(driver.store_conf.reservation_timeout)
    driver.gc()
    assert given_up(driver, queue, project) == [2, 3]
    assert read_all(driver, queue, project, consume_id) == ['c']
    assert lost(driver, queue, project, consume_id) == 0


def test_gc_forgets_given_up_positions_in_bounded_batches(
        driver, project, monkeypatch, reading):
    queue, _ = reading
    for name in ('a', 'b', 'c'):
        posted_twice(driver, monkeypatch, queue, project, name)
    assert given_up(driver, queue, project) == [3, 5, 7]
    assert given_up_module.prune(driver, queue, project, 10, batch=2) == 2
    assert given_up(driver, queue, project) == [7]
    assert given_up_module.prune(driver, queue, project, 7, batch=2) == 0
    assert given_up_module.prune(driver, queue, project, 8, batch=2) == 1
