"""Helpers of the backend-specific persistent consumer tests (Redis,
Swift) on one queue named 'q': the shared behaviour is in
tests/contract/test_consumers.py."""

import uuid

from tests.contract.helpers import post
from zaqar_delay import consumers

A = str(uuid.UUID('aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa'))
B = str(uuid.UUID('bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb'))


def make_queue(driver, project, **retention):
    metadata = {'_retention': retention} if retention else {}
    driver.queue_controller.create('q', metadata=metadata, project=project)


def subscribe(driver, project, consume_id, ttl=3600):
    return driver.subscription_controller.create(
        'q', consumers.PREFIX + consume_id, ttl, {}, project=project)


def page(driver, project, consume_id, marker=None, limit=10):
    pages = driver.message_controller.list(
        'q', project=project, marker=marker, limit=limit,
        client_uuid=uuid.UUID(consume_id))
    return list(next(pages)), next(pages)


def consumer(driver, project, consume_id):
    return driver.message_controller._consumer('q', project, consume_id)[1]


def behind_a_delayed_run(driver, project, delayed, per_post):
    """'q' delaying messages 60 s by default, consumer A subscribed, then
    ``delayed`` delayed messages (bodies 0, 1, ...; posts of
    ``per_post``) and one due message behind them."""
    driver.queue_controller.create(
        'q', metadata={'_default_message_delay': 60}, project=project)
    subscribe(driver, project, A)
    for start in range(0, delayed, per_post):
        post(driver, 'q', project,
             *range(start, min(delayed, start + per_post)), ttl=900)
    post(driver, 'q', project, 'due', ttl=900, delay=0)
