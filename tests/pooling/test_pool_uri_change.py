"""End to end: a pool's URI changed with ``PATCH /v2/pools/NAME`` from
Zaqar's own ``redis://`` store to ``delay.redis://`` on another
redis-server, as docs/migration.md ("With pooling") tells an operator to
do before moving a pool. A ``zaqar-server`` started after the change
routes the pool's queues to the new store, empty until the move; one
that served the pool before keeps Zaqar's driver for it, on the old
store, until it is restarted (Zaqar keeps a driver per pool for the life
of the process), which is why the guide changes the URI on a server
started for it.
"""

import uuid

import pytest
import redis
import requests

from tests import conftest
from tests.integration.conftest import Client
from tests.pooling.zaqar_pools import admin
from tests.pooling import zaqar_pools
from localstack import redis_server

pytestmark = pytest.mark.integration


@pytest.fixture
def old_and_new():
    servers = []
    try:
        for _ in range(2):
            servers.append(redis_server.RedisServer().start())
    except redis_server.RedisUnavailable as exc:
        for server in servers:
            server.stop()
        conftest.unavailable(str(exc))
    yield servers
    for server in servers:
        server.stop()


@pytest.fixture
def server(tmp_path):
    running = zaqar_pools.start_server(tmp_path, 'delay.redis',
                                       {'socket_timeout': 5.0})
    yield running
    running.stop()


def keys_of(store, project, queue):
    return [key for key in redis.Redis(port=store.port).keys()
            if project.encode() in key and queue.encode() in key]


def test_a_patched_pool_uri_routes_to_the_new_store_once_zaqar_restarts(
        server, old_and_new):
    old, new = old_and_new
    project = 'project-' + uuid.uuid4().hex[:8]
    client = Client(server.url, project)
    admin(server, 'PUT', '/pools/pc',
          {'weight': 100, 'uri': 'redis://127.0.0.1:{}'.format(old.port)})
    admin(server, 'PUT', '/flavors/f-pc', {'pool_list': ['pc']}, project)
    reply = client.call('PUT', '/queues/moving', json={'_flavor': 'f-pc'})
    assert reply.status_code == 201, reply.text
    assert client.post('moving', {'ttl': 300, 'body': 'before'}
                       ).status_code == 201
    assert keys_of(old, project, 'moving')

    reply = requests.patch(
        server.url + '/v2/pools/pc', timeout=30,
        json={'uri': 'delay.redis://127.0.0.1:{}/0'.format(new.port)},
        headers={'X-Project-ID': 'admin', 'Client-ID': str(uuid.uuid4()),
                 'X-Roles': 'admin'})
    assert reply.status_code == 200, reply.text
    assert reply.json()['uri'].startswith('delay.redis://'), reply.text

    # The server that served the pool still posts into the old store.
    assert client.post('moving', {'ttl': 300, 'body': 'stale'}
                       ).status_code == 201
    assert client.bodies('moving', echo='true') == ['before', 'stale']
    assert not keys_of(new, project, 'moving')

    server.stop()
    server.start()
    # Started after the change: the pool is the new store, empty until
    # the move, and a post lands there in zaqar-delay's layout.
    assert client.bodies('moving', echo='true') == []
    assert client.post('moving', {'ttl': 300, 'body': 'after'}
                       ).status_code == 201
    assert client.bodies('moving', echo='true') == ['after']
    assert any(b'{%s/moving}' % project.encode() in key
               for key in keys_of(new, project, 'moving'))
    # The old store keeps what was posted to it, for the move to read.
    assert keys_of(old, project, 'moving')
