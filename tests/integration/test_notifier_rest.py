"""Zaqar's WSGI API with its notifier on (``message_pipeline =
zaqar.notification.notifier``), on Redis (tests/test_packaging.py checks
every backend registers the stage): the subscription list shows
persistent consumers as before (our subscription stage), and a webhook
on a local receiver gets a post's messages (issue 21)."""

import uuid

import pytest

from localstack import notifier
from tests.integration.conftest import Client

NOTIFIER_ON = """
[transport]
subscriber_types = http,https,mailto,cursor

[storage]
message_pipeline = zaqar.notification.notifier
"""


@pytest.fixture
def backend_name():
    return 'redis'


@pytest.mark.parametrize('operator_config', [NOTIFIER_ON])
def test_consumers_are_listed_and_a_webhook_is_notified(zaqar_url, project):
    client = Client(zaqar_url, project)
    assert client.call('PUT', '/queues/feed', json={}).status_code == 201
    with notifier.webhook_receiver() as (url, received):
        subscribers = [url] + ['cursor:' + str(uuid.uuid4())
                               for _ in range(3)]
        for subscriber in subscribers:
            reply = client.call('POST', '/queues/feed/subscriptions', json={
                'subscriber': subscriber, 'ttl': 3600, 'options': {}})
            assert reply.status_code == 201, reply.text
        listed = client.call('GET', '/queues/feed/subscriptions',
                             params={'limit': 10}).json()['subscriptions']
        assert sorted(s['subscriber'] for s in listed) == sorted(subscribers)
        assert client.post('feed', {'ttl': 3600, 'body': 'hello'},
                           {'ttl': 3600, 'body': 'world'}).status_code == 201
        got = sorted(received.get(timeout=30)['body'] for _ in range(2))
    assert got == ['hello', 'world']
