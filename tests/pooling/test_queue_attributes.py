"""With pooling, a queue's attributes are checked as without it: Zaqar's
pooling queue controller writes creates and metadata changes to the
management store itself, so they reached no pool's pipeline and were
stored unchecked (api-ref, queues.inc: PUT and PATCH answer 400 naming
the attribute and change nothing). Queues of a pool on Zaqar's own
driver pass unchecked, as before."""

import json
import uuid

import pytest
import requests

from tests import conftest as shared
from tests.integration.conftest import Client
from tests.pooling import zaqar_pools

pytestmark = pytest.mark.integration

JSON_PATCH = {'Content-Type':
              'application/openstack-messaging-v2.0-json-patch'}
REFUSED = [
    {'_dead_letter_queue': 'feed'},
    {'_message_group_key': 'k', '_enable_encrypt_messages': True},
    {'_retention': {'time': 'x'}},
    {'_message_group_sticky': 60},
]


def patch(client, queue, operations):
    return requests.patch(client.base + '/queues/' + queue, timeout=30,
                          headers=dict(client.headers, **JSON_PATCH),
                          data=json.dumps(operations))


@pytest.fixture(scope='module')
def pooled(tmp_path_factory):
    """zaqar-server with ``pooling = true``: flavor ``ours`` has one
    delay.redis pool, flavor ``zaqars`` one pool on Zaqar's own Redis
    driver (both on one redis-server, different databases); flavor
    ``mixed`` a pool on Zaqar's Redis driver whose redis-server is gone
    (weight 0: Zaqar never places a queue there), then a delay.redis
    one."""
    redis_servers = shared.redis_session()
    redis = next(redis_servers)
    gone_servers = shared.redis_session()
    gone = next(gone_servers)
    server = zaqar_pools.start_server(
        tmp_path_factory.mktemp('zd-pooled-attributes'), 'delay.redis')
    try:
        project = 'project-' + uuid.uuid4().hex[:8]
        for flavor, pools in (
                ('ours', [('ours', 100, 'delay.redis://127.0.0.1:{}/0')]),
                ('zaqars', [('zaqars', 100, 'redis://127.0.0.1:{}/1')]),
                ('mixed', [('gone', 0, 'redis://127.0.0.1:{gone}/0'),
                           ('ours2', 100, 'delay.redis://127.0.0.1:{}/2')])):
            for pool, weight, uri in pools:
                zaqar_pools.admin(server, 'PUT', '/pools/' + pool, {
                    'weight': weight,
                    'uri': uri.format(redis.port, gone=gone.port)})
            zaqar_pools.admin(server, 'PUT', '/flavors/' + flavor, {
                'pool_list': [pool for pool, _, _ in pools]}, project)
        next(gone_servers, None)
        yield Client(server.url, project)
    finally:
        server.stop()
        next(gone_servers, None)
        next(redis_servers, None)


@pytest.mark.parametrize('metadata', REFUSED)
def test_a_put_on_our_pool_refuses_an_invalid_attribute_and_creates_nothing(
        pooled, metadata):
    reply = pooled.call('PUT', '/queues/feed',
                        json=dict(metadata, _flavor='ours'))
    assert reply.status_code == 400, (reply.status_code, reply.text)
    assert next(iter(metadata)) in reply.text
    listed = pooled.call('GET', '/queues').json()
    assert 'feed' not in [queue['name'] for queue in listed['queues']]


def test_a_patch_on_our_pool_refuses_an_invalid_attribute(pooled):
    assert pooled.call('PUT', '/queues/patched', json={
        '_flavor': 'ours', '_message_group_key': 'g'}).status_code == 201
    try:
        reply = patch(pooled, 'patched', [{
            'op': 'add', 'path': '/metadata/_retention',
            'value': {'time': 'x'}}])
        assert reply.status_code == 400, (reply.status_code, reply.text)
        assert '_retention' in reply.text
        stored = pooled.call('GET', '/queues/patched').json()
        assert stored['_message_group_key'] == 'g'
        assert '_retention' not in stored
        # A valid change still applies.
        assert patch(pooled, 'patched', [{
            'op': 'add', 'path': '/metadata/_message_group_sticky',
            'value': 60}]).status_code == 200
    finally:
        pooled.call('DELETE', '/queues/patched')


def test_queues_of_a_pool_on_zaqars_driver_pass_unchecked(pooled):
    reply = pooled.call('PUT', '/queues/theirs', json={
        '_flavor': 'zaqars', '_retention': {'time': 'x'}})
    try:
        assert reply.status_code == 201, reply.text
    finally:
        pooled.call('DELETE', '/queues/theirs')


def test_a_pool_down_that_zaqar_never_places_on_fails_no_put(pooled):
    """Tried: PUT of a queue of flavor ``mixed``, whose first pool is on
    Zaqar's Redis driver with its redis-server gone (weight 0), beside a
    delay.redis pool. Judging the queue's attributes built every offered
    pool's driver until one was ours, and Zaqar's connects as it is
    built: the PUT failed though Zaqar places the queue on our pool. Now
    only our pools' drivers are built."""
    reply = pooled.call('PUT', '/queues/mixed', json={
        '_flavor': 'mixed', '_message_group_key': 'g'})
    try:
        assert reply.status_code == 201, (reply.status_code, reply.text)
        refused = pooled.call('PUT', '/queues/mixed-refused', json={
            '_flavor': 'mixed', '_retention': {'time': 'x'}})
        assert refused.status_code == 400, (refused.status_code,
                                            refused.text)
        assert '_retention' in refused.text
    finally:
        pooled.call('DELETE', '/queues/mixed')
