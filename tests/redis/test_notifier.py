"""Redis: what a post costs with Zaqar's notifier on, counted in round
trips (benchmarks/round_trips.py), never timed; and the notifier's index
filled for subscriptions stored before it existed."""

import pytest
import redis as redis_py

from benchmarks import round_trips
from localstack import notifier
from tests.contract.helpers import post
from zaqar_delay.drivers.redis import keys
from zaqar_delay.drivers.redis import subscriptions


@pytest.fixture
def raw(redis_url):
    return redis_py.Redis.from_url(redis_url)


def post_round_trips(driver, notifying, queue, project):
    with round_trips.counting() as counter:
        post(notifying, queue, project, *range(10))
    return counter.of(driver.connection)


def test_a_post_costs_the_same_with_25_consumers_as_with_none(
        driver, make_queue, project):
    queue = make_queue()
    notifying = notifier.notifying(driver)
    subs = driver.subscription_controller
    with notifier.webhook_receiver() as (url, received):
        subs.create(queue, url, 3600, {}, project=project)
        # Loads the scripts, fills the policy copy, then caches it.
        post(notifying, queue, project, 'warm-up')
        post(notifying, queue, project, 'warm-up')
        alone = post_round_trips(driver, notifying, queue, project)
        for _ in range(25):
            subs.create(queue, notifier.consumer_subscriber(), 3600, {},
                        project=project)
        among_consumers = post_round_trips(driver, notifying, queue, project)
        for _ in range(22):
            received.get(timeout=30)
    assert among_consumers == alone


def test_subscriptions_stored_before_the_index_are_filed_once(
        driver, make_queue, project, raw, monkeypatch):
    monkeypatch.setattr(subscriptions, 'NOTIFIED_PER_CALL', 2)
    queue = make_queue()
    subs = driver.subscription_controller
    hooks = []
    for i in range(4):
        subs.create(queue, notifier.consumer_subscriber(), 3600, {},
                    project=project)
        hooks.append('http://127.0.0.1:9/%d' % i)
        subs.create(queue, hooks[-1], 3600, {}, project=project)
    # As an earlier release left them: no Q:notified.
    raw.delete(keys.notified_key(queue, project),
               keys.queue_prefix(queue, project) + ':nindexed')
    pages = subs.list(queue, project, limit=10)
    assert [sub['subscriber'] for sub in next(pages)] == hooks
    assert raw.get(keys.queue_prefix(queue, project) + ':nindexed') == (
        b'done')
    assert raw.zcard(keys.notified_key(queue, project)) == 4


def test_an_expired_subscription_leaves_the_notified_index(
        driver, make_queue, project, raw):
    queue = make_queue()
    subs = driver.subscription_controller
    gone = subs.create(queue, 'http://127.0.0.1:9/gone', 3600, {},
                       project=project)
    kept = subs.create(queue, 'http://127.0.0.1:9/kept', 3600, {},
                       project=project)
    raw.delete(keys.subscription_key(queue, project, gone))  # expired
    pages = subs.list(queue, project, limit=1)
    assert [sub['id'] for sub in next(pages)] == [kept]
    assert raw.zrange(keys.notified_key(queue, project), 0, -1) == [
        kept.encode()]
