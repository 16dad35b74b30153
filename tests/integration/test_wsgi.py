"""Zaqar's unchanged v2 REST API served on our drivers, over HTTP."""

import json

import pytest
import requests

pytestmark = pytest.mark.integration


def test_delayed_queue_end_to_end(client):
    assert client.call('PUT', '/queues/orders',
                       json={'_default_message_delay': 600}).status_code == 201
    reply = client.post('orders', {'ttl': 900, 'body': {'n': 'default'}},
                        {'ttl': 900, 'body': {'n': 'now'}, 'delay': 0},
                        {'ttl': 900, 'body': {'n': 'later'}, 'delay': 300})
    assert reply.status_code == 201, reply.text
    assert client.bodies('orders') == [{'n': 'now'}]
    assert client.bodies('orders', include_delayed='true') == [
        {'n': 'default'}, {'n': 'now'}, {'n': 'later'}]
    claimed = client.claim('orders')
    assert [m['body'] for m in claimed] == [{'n': 'now'}]
    assert client.claim('orders') == []
    stats = client.stats('orders')
    assert (stats['total'], stats['claimed'], stats['delayed']) == (3, 1, 2)
    href = claimed[0]['href']
    assert client.call('DELETE', href.replace('/v2', '', 1)).status_code == 204
    assert client.stats('orders')['total'] == 2


def test_claims_never_return_delayed_messages_when_interleaved(client):
    client.call('PUT', '/queues/mixed', json={'_default_message_delay': 600})
    for i in range(10):
        client.post('mixed', {'ttl': 900, 'body': 'ready-%d' % i, 'delay': 0},
                    {'ttl': 900, 'body': 'delayed-%d' % i})
    got = [m['body'] for m in client.claim('mixed', limit=20)]
    assert got == ['ready-%d' % i for i in range(10)]


def test_normal_queue_ignores_message_delay(client):
    client.call('PUT', '/queues/plain', json={})
    client.post('plain', {'ttl': 900, 'body': 'x', 'delay': 600})
    assert [m['body'] for m in client.claim('plain')] == ['x']


@pytest.mark.parametrize('bad', [-1, 901, True, 1.5, '5', None])
def test_bad_delay_over_rest_is_400_and_stores_nothing(client, bad):
    client.call('PUT', '/queues/strict', json={'_default_message_delay': 60})
    reply = client.post('strict', {'ttl': 900, 'body': 'good', 'delay': 0},
                        {'ttl': 900, 'body': 'bad', 'delay': bad})
    assert reply.status_code == 400, reply.text
    assert 'delay' in reply.json()['description'].lower()
    assert client.bodies('strict', include_delayed='true') == []
    assert client.stats('strict')['total'] == 0


def test_dead_letter_queue_over_rest(client):
    client.call('PUT', '/queues/dlq', json={})
    client.call('PUT', '/queues/work', json={
        '_max_claim_count': 1, '_dead_letter_queue': 'dlq',
        '_dead_letter_queue_messages_ttl': 3600})
    client.post('work', {'ttl': 900, 'body': 'poison'})
    claimed = client.claim('work', ttl=60)
    claim_href = claimed[0]['href'].split('claim_id=')[1]
    assert client.call('DELETE', '/queues/work/claims/' +
                       claim_href).status_code == 204
    assert client.claim('work') == []
    assert client.bodies('dlq') == ['poison']


def test_queue_delete_and_stats_on_empty_queue(client):
    client.call('PUT', '/queues/gone', json={})
    client.post('gone', {'ttl': 900, 'body': 1})
    assert client.call('DELETE', '/queues/gone').status_code == 204
    assert client.stats('gone')['total'] == 0


def test_subscriptions_over_rest(client):
    client.call('PUT', '/queues/notify', json={})
    reply = client.call('POST', '/queues/notify/subscriptions', json={
        'subscriber': 'http://127.0.0.1:9/hook', 'ttl': 3600,
        'options': {'k': 'v'}})
    assert reply.status_code == 201, reply.text
    sub_id = reply.json()['subscription_id']
    listed = client.call('GET', '/queues/notify/subscriptions').json()
    assert [s['id'] for s in listed['subscriptions']] == [sub_id]
    assert client.call('DELETE', '/queues/notify/subscriptions/' +
                       sub_id).status_code == 204


def test_tenants_do_not_see_each_other(zaqar_url, client):
    from tests.integration.conftest import Client
    other = Client(zaqar_url, 'another-project')
    client.call('PUT', '/queues/shared-name', json={})
    other.call('PUT', '/queues/shared-name', json={})
    client.post('shared-name', {'ttl': 900, 'body': 'mine'})
    assert other.bodies('shared-name') == []
    assert other.claim('shared-name') == []


@pytest.mark.parametrize('dlq', ['itself', 'no spaces', 'x' * 65])
def test_bad_dead_letter_queue_is_400_on_put_and_patch(client, dlq):
    dlq = 'self-dlq' if dlq == 'itself' else dlq
    reply = client.call('PUT', '/queues/self-dlq',
                        json={'_dead_letter_queue': dlq})
    assert reply.status_code == 400, reply.text
    assert '_dead_letter_queue' in reply.json()['description']
    # Nothing stored (v2 answers GET of an unknown queue with defaults).
    assert client.call('GET', '/queues/self-dlq').json().get(
        '_dead_letter_queue') is None
    assert client.call('PUT', '/queues/self-dlq',
                       json={'_max_claim_count': 2}).status_code == 201
    reply = requests.patch(
        client.base + '/queues/self-dlq', timeout=30,
        headers=dict(client.headers, **{
            'Content-Type':
                'application/openstack-messaging-v2.0-json-patch'}),
        data=json.dumps([{'op': 'add', 'path': '/metadata/_dead_letter_queue',
                          'value': dlq}]))
    assert reply.status_code == 400, reply.text
    assert '_dead_letter_queue' in reply.json()['description']
    metadata = client.call('GET', '/queues/self-dlq').json()
    assert metadata.get('_dead_letter_queue') is None
    assert metadata['_max_claim_count'] == 2
