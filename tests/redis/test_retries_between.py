"""Redis: a call whose reply is lost is run again by the driver's retry
policy (connection.guarded); here another call changes the state in
between, as another node or consumer would. The retry must still have
the effect of the one call: it must not store a copy that moved on,
free a subscriber another subscription took, forget a consumer
subscribed again, unpin a group pinned since, or miscount a purge."""

import uuid

import pytest
import redis as redis_py

from tests.contract.helpers import claim, listed, post
from tests.contract.test_sticky import ALICE, BOB, STICKY, claim_as, msg
from zaqar_delay import consumers


@pytest.fixture
def lose_reply_of(driver, monkeypatch):
    """lose_reply_of(script, queue, between): the next run of ``script``
    on ``queue`` runs in Redis, then ``between()`` runs, then its reply is
    lost (ConnectionError) and the script is run again."""
    monkeypatch.setattr(driver.store_conf, 'reconnect_sleep', 0.0)
    original = driver.scripts.run
    armed = []

    def lossy(name, *args, **kwargs):
        result = original(name, *args, **kwargs)
        if armed and armed[0][:2] == (name, args[0]):
            between = armed.pop()[2]
            between()
            raise redis_py.exceptions.ConnectionError('reply lost')
        return result

    monkeypatch.setattr(driver.scripts, 'run', lossy)

    def arm(name, queue, between):
        armed.append((name, queue, between))
    return arm


@pytest.fixture
def lose_next_pipeline_reply(driver, monkeypatch):
    """The next pipeline or script sent through driver.guarded runs, then
    ``between()``, then its reply is lost and it is sent again."""
    driver.subscription_controller
    monkeypatch.setattr(driver.store_conf, 'reconnect_sleep', 0.0)
    original, armed = driver.guarded, []

    def guarded(call, kept_until=None):
        if not armed:
            return original(call, kept_until)
        between, first = armed.pop(), [True]

        def lossy():
            result = call()
            if first:
                first.pop()
                between()
                raise redis_py.exceptions.ConnectionError('reply lost')
            return result
        return original(lossy, kept_until)

    monkeypatch.setattr(driver, 'guarded', guarded)
    return armed.append


def grouped(driver, project, *names):
    for name in names:
        driver.queue_controller.create(
            name, metadata={'_message_group_key': 'g'}, project=project)


def test_a_moved_groups_copy_retried_after_it_moved_on_is_not_stored_again(
        driver, project, clock, lose_reply_of):
    """The copy of a group moved q -> t lost its reply; before the retry
    the group was moved on, t -> u. The retry stored it in t again: one
    message in two queues."""
    grouped(driver, project, 'q', 't', 'u')
    post(driver, 'q', project, {'g': 'a', 'n': 1})
    messages = driver.message_controller

    def moved_on():
        clock.advance(1)
        assert messages.move_group('t', 'a', 'u', project=project) == 1

    lose_reply_of('post', 't', moved_on)
    assert messages.move_group('q', 'a', 't', project=project) == 1
    assert [m['body'] for m in listed(driver, 'u', project)] == [
        {'g': 'a', 'n': 1}]
    assert listed(driver, 't', project, include_claimed=True) == []


def test_a_dead_letter_copy_retried_after_it_was_dead_lettered_again(
        driver, project, clock, lose_reply_of):
    """The dead letter's copy into dlq lost its reply; before the retry
    the message was claimed there and dead-lettered on to dlq2. The
    retry stored it in dlq again."""
    driver.queue_controller.create('dlq2', project=project)
    driver.queue_controller.create('dlq', project=project, metadata={
        '_max_claim_count': 1, '_dead_letter_queue': 'dlq2'})
    driver.queue_controller.create('q', project=project, metadata={
        '_max_claim_count': 1, '_dead_letter_queue': 'dlq'})
    post(driver, 'q', project, 'poison')
    claim(driver, 'q', project, ttl=60)
    clock.advance(61)

    def failed_again_in_dlq():
        claim_id, got = claim(driver, 'dlq', project)
        assert [m['body'] for m in got] == ['poison']
        driver.claim_controller.delete('dlq', claim_id, project=project)
        clock.advance(1)
        assert claim(driver, 'dlq', project) == (None, [])   # to dlq2

    lose_reply_of('post', 'dlq', failed_again_in_dlq)
    assert claim(driver, 'q', project) == (None, [])          # to dlq
    assert [m['body'] for m in listed(driver, 'dlq2', project)] == [
        'poison']
    assert listed(driver, 'dlq', project, include_claimed=True) == []


def test_a_message_moved_back_to_a_queue_it_left_is_stored_there(
        driver, project, clock):
    """What the two tests above skip is only what left after its copy:
    a group moved t -> q and back q -> t arrives in t again."""
    grouped(driver, project, 'q', 't')
    post(driver, 't', project, {'g': 'a', 'n': 1})
    messages = driver.message_controller
    assert messages.move_group('t', 'a', 'q', project=project) == 1
    clock.advance(1)
    assert messages.move_group('q', 'a', 't', project=project) == 1
    assert [m['body'] for m in listed(driver, 't', project)] == [
        {'g': 'a', 'n': 1}]


def test_a_subscription_delete_retried_leaves_a_new_subscribers_entry(
        driver, project, lose_next_pipeline_reply):
    """The delete lost its reply; before the retry another subscription
    took the same subscriber URI. The retry freed the URI under it: the
    new subscription could not be found by its subscriber, and a third
    create of that URI was let through."""
    driver.queue_controller.create('q', project=project)
    subscriptions = driver.subscription_controller
    hook = 'http://example.com/hook'
    first = subscriptions.create('q', hook, 3600, {}, project=project)
    again = []
    lose_next_pipeline_reply(lambda: again.append(
        subscriptions.create('q', hook, 3600, {}, project=project)))
    subscriptions.delete('q', first, project=project)
    assert again[0] is not None
    found = subscriptions.get_with_subscriber('q', hook, project=project)
    assert found is not None and found['id'] == again[0]
    assert subscriptions.create('q', hook, 3600, {}, project=project) is None


def test_a_consumer_forget_retried_leaves_the_consumer_subscribed_again(
        driver, project, lose_reply_of):
    """Deleting a consumer's subscription forgets the consumer; that
    forget lost its reply, and before the retry the consumer subscribed
    again. The retry removed the new consumer's state: its reads were
    no longer tracked, and read-by-all stopped counting it."""
    driver.queue_controller.create('q', project=project)
    subscriptions = driver.subscription_controller
    consume_id = str(uuid.uuid4())
    cursor = consumers.PREFIX + consume_id
    first = subscriptions.create('q', cursor, 3600, {}, project=project)
    again = []
    lose_reply_of('consumer_forget', 'q', lambda: again.append(
        subscriptions.create('q', cursor, 3600, {}, project=project)))
    subscriptions.delete('q', first, project=project)
    assert again[0] is not None
    assert driver.message_controller._consumer('q', project,
                                               consume_id)[1] is not None


def test_an_unpin_retried_after_another_client_took_the_group(
        driver, project, lose_reply_of):
    """The unpin freed the group from Alice and lost its reply; before
    the retry Bob claimed the group, which pinned it to him. The retry
    unpinned Bob, and answered Bob."""
    driver.queue_controller.create('q', metadata=STICKY, project=project)
    post(driver, 'q', project, msg('a', 1), msg('a', 2))
    claim_id, _ = claim_as(ALICE, driver, 'q', project)
    driver.claim_controller.delete('q', claim_id, project=project)
    bob = []
    lose_reply_of('group_unpin', 'q', lambda: bob.append(
        claim_as(BOB, driver, 'q', project)))
    assert driver.message_controller.unpin_group(
        'q', 'a', project=project) == ALICE
    assert [m['body']['n'] for m in bob[0][1]] == [1]
    # Pinned to Bob: Alice gets nothing of the group.
    driver.claim_controller.delete('q', bob[0][0], project=project)
    assert claim_as(ALICE, driver, 'q', project)[1] == []


def test_a_group_purge_step_retried_counts_what_it_purged(
        driver, project, lose_reply_of):
    """The purge's last step lost its reply; its retry found nothing left
    and answered 0, so the purge reported fewer than it deleted."""
    grouped(driver, project, 'q')
    post(driver, 'q', project, *[{'g': 'a', 'n': n} for n in range(5)])
    lose_reply_of('group_purge', 'q', lambda: None)
    assert driver.message_controller.purge_group(
        'q', 'a', project=project) == 5
