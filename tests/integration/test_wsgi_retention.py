"""Retention through Zaqar's real WSGI app (issue 10): ``_retention`` set
with PUT and PATCH, accepted when it tightens the operator's settings and
refused with a 400 naming the field, the value and the bound otherwise;
stats show the effective settings and what retention removed; listing
leaves out what retention no longer keeps."""

import json

import pytest
import requests

OPERATOR = '[retention]\ntime = 3600\nlength = 5\n'
pytestmark = pytest.mark.parametrize('operator_config', [OPERATOR],
                                     ids=['time=3600,length=5'])


def patch_metadata(client, queue, key, value):
    return requests.patch(
        client.base + '/queues/' + queue, timeout=30,
        headers=dict(client.headers, **{
            'Content-Type':
                'application/openstack-messaging-v2.0-json-patch'}),
        data=json.dumps([{'op': 'add', 'path': '/metadata/' + key,
                          'value': value}]))


def retention_stats(client, queue):
    reply = client.call('GET', '/queues/%s/stats' % queue)
    assert reply.status_code == 200, reply.text
    return reply.json()['retention']


def test_a_tightening_retention_is_taken_on_put_and_patch(client):
    assert client.call('PUT', '/queues/tight', json={
        '_retention': {'length': 3}}).status_code == 201
    assert client.call('GET', '/queues/tight').json()['_retention'] == {
        'length': 3}
    assert retention_stats(client, 'tight') == {
        'policy': 'cleanup', 'time': 3600, 'length': 3,
        'consumers_required': None, 'removed': 0}
    reply = patch_metadata(client, 'tight', '_retention',
                           {'time': 60, 'length': 5})
    assert reply.status_code == 200, reply.text
    report = retention_stats(client, 'tight')
    assert (report['time'], report['length']) == (60, 5)


@pytest.mark.parametrize('value, shown', [
    ({'length': 6}, ['_retention.length', '6', '5']),
    ({'time': 0}, ['_retention.time', 'got 0', '3600']),
    ({'policy': 'disabled'}, ['_retention.policy', "'disabled'",
                              "'cleanup'"]),
    ({'time': '60'}, ['_retention.time', "'60'", '3600']),
    ({'size': 1}, ['_retention', "'size'"]),
    (5, ['_retention', '5', 'an object']),
])
def test_a_loosening_or_malformed_retention_is_400_and_stores_nothing(
        client, value, shown):
    reply = client.call('PUT', '/queues/loose', json={'_retention': value})
    assert reply.status_code == 400, reply.text
    for text in shown:
        assert text in reply.json()['description']
    # Nothing stored (v2 answers GET of an unknown queue with defaults).
    assert '_retention' not in client.call('GET', '/queues/loose').json()
    assert client.call('PUT', '/queues/loose', json={
        '_retention': {'length': 2}}).status_code == 201
    reply = patch_metadata(client, 'loose', '_retention', value)
    assert reply.status_code == 400, reply.text
    for text in shown:
        assert text in reply.json()['description']
    assert client.call('GET', '/queues/loose').json()['_retention'] == {
        'length': 2}


def test_messages_past_retention_are_not_listed_and_stats_count_them(
        client):
    client.call('PUT', '/queues/bounded', json={})
    for n in range(8):
        assert client.post('bounded', {'ttl': 300, 'body': n}
                           ).status_code == 201
    assert client.bodies('bounded') == [3, 4, 5, 6, 7]
    assert [m['body'] for m in client.claim('bounded', limit=10)] == [
        3, 4, 5, 6, 7]
    stats = client.call('GET', '/queues/bounded/stats').json()
    assert stats['messages']['total'] == 5
    assert stats['messages']['claimed'] == 5
    # Removed by the claim or not yet: never more than the three dropped.
    assert stats['retention']['removed'] <= 3
    assert (stats['retention']['time'],
            stats['retention']['length']) == (3600, 5)
