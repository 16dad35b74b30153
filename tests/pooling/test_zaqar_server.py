"""End to end: ``zaqar-server`` with ``pooling = True`` on two redis-servers
(tests/pooling/zaqar_pools.py): each queue's keys on the Redis that its
catalogue entry names, also after a restart; delay, groups and dead letters
on each pool; a pool with a bad option.
"""

import os
import uuid

import pytest
import redis

from tests import conftest
from tests.integration.conftest import Client
from tests.pooling.zaqar_pools import POOLS
from tests.pooling.zaqar_pools import admin
from tests.pooling.zaqar_pools import catalogue
from tests.pooling import zaqar_pools
from localstack import redis_server

pytestmark = pytest.mark.integration


def delay_uri(server):
    return 'delay.redis://127.0.0.1:{}/0'.format(server.port)


@pytest.fixture(scope='module')
def redis_pools():
    servers = {}
    try:
        for pool in POOLS:
            servers[pool] = redis_server.RedisServer().start()
    except redis_server.RedisUnavailable as exc:
        for server in servers.values():
            server.stop()
        conftest.unavailable(str(exc))
    yield servers
    for server in servers.values():
        server.stop()


@pytest.fixture(scope='module')
def server(tmp_path_factory):
    running = zaqar_pools.start_server(
        tmp_path_factory.mktemp('zd-pooling'), 'delay.redis',
        {'socket_timeout': 5.0})
    yield running
    running.stop()


@pytest.fixture(scope='module')
def pools(server, redis_pools):
    zaqar_pools.register(server, {pool: delay_uri(redis_pools[pool])
                                  for pool in POOLS})
    return redis_pools


def test_queues_live_on_their_pools_redis_also_after_a_restart(server,
                                                               pools):
    def holds(pool, project, queue):
        return redis.Redis(port=pools[pool].port).keys(
            '*{%s/%s}*' % (project, queue))

    zaqar_pools.queues_stay_on_their_pools(server, holds)


def test_dead_letters_are_found_where_zaqar_looks(server, pools):
    # The dead-letter queue does not exist: the driver creates it and
    # files it under the pool of the queue that feeds it.
    project = 'project-' + uuid.uuid4().hex[:8]
    client = Client(server.url, project)
    # A pool belongs to one flavor at a time (Zaqar 23): a new one.
    admin(server, 'PUT', '/flavors/dl-pb', {'pool_list': ['pb']}, project)
    reply = client.call('PUT', '/queues/feed',
                        json={'_flavor': 'dl-pb', '_max_claim_count': 1,
                              '_dead_letter_queue': 'letters'})
    assert reply.status_code == 201, reply.text
    assert client.post('feed', {'ttl': 300, 'body': 'x'}).status_code == 201
    reply = client.call('POST', '/queues/feed/claims',
                        json={'ttl': 60, 'grace': 60})
    assert reply.status_code == 201, reply.text
    claim_path = reply.headers['Location'].split('/v2', 1)[1]
    assert client.call('DELETE', claim_path).status_code == 204
    assert client.claim('feed') == []
    assert catalogue(server.database, project) == {'feed': 'pb',
                                                   'letters': 'pb'}
    assert client.bodies('letters') == ['x']


def test_a_pool_with_a_bad_option_answers_503(server, redis_pools):
    # Zaqar checks only that a new pool's URI can be reached; the option
    # is refused (by the option's bounds, in Zaqar's dynamic_conf or in our
    # driver) when the pool's driver is built for a request.
    project = 'project-' + uuid.uuid4().hex[:8]
    client = Client(server.url, project)
    spare = redis_server.RedisServer().start()
    try:
        admin(server, 'PUT', '/pools/bad',
              {'weight': 100, 'uri': delay_uri(spare),
               'options': {'socket_timeout': 0.01}})
        admin(server, 'PUT', '/flavors/f-bad', {'pool_list': ['bad']},
              project)
        reply = client.call('PUT', '/queues/q', json={'_flavor': 'f-bad'})
        assert reply.status_code == 503, reply.text
        with open(os.path.join(server.workdir, 'zaqar.log')) as log:
            text = log.read()
        assert 'greater than or equal to 0.1' in text
    finally:
        spare.stop()
