"""Message groups through Zaqar's unchanged v2 REST API."""

import pytest

pytestmark = pytest.mark.integration


def test_message_groups_over_rest(client):
    client.call('PUT', '/queues/carts', json={'_message_group_key': 'cart'})
    client.post('carts', {'ttl': 900, 'body': {'cart': 'c1', 'op': 'add'}},
                {'ttl': 900, 'body': {'cart': 'c1', 'op': 'remove'}},
                {'ttl': 900, 'body': {'cart': 'c2', 'op': 'add'}},
                {'ttl': 900, 'body': {'note': 'ungrouped'}})
    first = client.claim('carts', limit=10)
    assert [m['body'] for m in first] == [
        {'cart': 'c1', 'op': 'add'}, {'cart': 'c2', 'op': 'add'},
        {'note': 'ungrouped'}]
    assert client.claim('carts') == []
    stats = client.stats('carts')
    assert (stats['groups'], stats['groups_in_flight']) == (2, 2)
    assert client.call('DELETE', first[0]['href'].replace(
        '/v2', '', 1)).status_code == 204
    assert [m['body'] for m in client.claim('carts')] == [
        {'cart': 'c1', 'op': 'remove'}]


def test_bad_group_id_over_rest_is_400(client):
    client.call('PUT', '/queues/carts2', json={'_message_group_key': 'cart'})
    reply = client.post('carts2', {'ttl': 900, 'body': {'cart': 1.5}})
    assert reply.status_code == 400
    assert 'group id' in reply.json()['description']
    assert client.stats('carts2')['total'] == 0
