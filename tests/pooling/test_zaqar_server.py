"""End to end: ``zaqar-server`` with ``pooling = True`` on two redis-servers.

As an operator would: Zaqar's sqlalchemy management store on sqlite (Zaqar
23's redis management store cannot register pools), two pools registered
with ``PUT /v2/pools/<name>`` and ``delay.redis://`` URIs, one flavor per
pool so that queues land on a known pool, then queues on both. Each
queue's keys must be on the Redis that its catalogue entry names, before
and after a ``zaqar-server`` restart, and delay and groups work on each.
"""

import os
import sqlite3
import time
import uuid

import pytest
import requests
import sqlalchemy

from tests import conftest
from tests.integration.conftest import Client
from tests.servers import redis_server
from tests.servers import zaqar_server

pytestmark = pytest.mark.integration

POOLS = ('pa', 'pb')
QUEUES_PER_POOL = 3
# Long enough that the first claims run before any delay ends, even on a
# loaded machine.
DELAY = 10


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


def create_schema(path):
    # Zaqar's alembic migrations speak MySQL only; its sqlalchemy store's
    # own tests create the schema from its table definitions, as here.
    from zaqar.storage.sqlalchemy import tables
    engine = sqlalchemy.create_engine('sqlite:///' + path)
    tables.metadata.create_all(engine)
    engine.dispose()


@pytest.fixture(scope='module')
def server(redis_pools, tmp_path_factory):
    directory = tmp_path_factory.mktemp('zd-pooling')
    database = str(directory / 'zaqar.db')
    create_schema(database)
    running = zaqar_server.ZaqarServer(
        None, 'delay.redis', {'socket_timeout': 5.0},
        management_store='sqlalchemy',
        management_uri='sqlite:///' + database,
        extra='[DEFAULT]\npooling = true\nadmin_mode = true\n').start()
    running.database = database
    yield running
    running.stop()


def admin(server, method, path, body, project='admin'):
    reply = requests.request(
        method, server.url + '/v2' + path, json=body, timeout=30,
        headers={'X-Project-ID': project, 'Client-ID': str(uuid.uuid4()),
                 'X-Roles': 'admin'})
    assert reply.status_code in (201, 204), (path, reply.status_code,
                                             reply.text)


@pytest.fixture(scope='module')
def pools(server, redis_pools):
    for pool in POOLS:
        admin(server, 'PUT', '/pools/' + pool,
              {'weight': 100, 'uri': delay_uri(redis_pools[pool])})
    return redis_pools


def catalogue(database, project):
    with sqlite3.connect(database) as db:
        return dict(db.execute(
            'SELECT queue, pool FROM Catalogue WHERE project = ?',
            (project,)).fetchall())


def keys_of(server, project, queue):
    import redis
    client = redis.Redis(port=server.port)
    return client.keys('*{%s/%s}*' % (project, queue))


def test_queues_live_on_their_pools_redis_also_after_a_restart(server,
                                                               pools):
    project = 'project-' + uuid.uuid4().hex[:8]
    client = Client(server.url, project)
    placed, posted = {}, None
    for pool in POOLS:
        # Flavors belong to a project; one per pool places queues on it.
        admin(server, 'PUT', '/flavors/f-' + pool, {'pool_list': [pool]},
              project)
        for i in range(QUEUES_PER_POOL):
            queue = 'q-{}-{}'.format(pool, i)
            reply = client.call('PUT', '/queues/' + queue,
                                json={'_flavor': 'f-' + pool,
                                      '_default_message_delay': DELAY,
                                      '_message_group_key': 'g'})
            assert reply.status_code == 201, reply.text
            placed[queue] = pool
            reply = client.post(
                queue, {'ttl': 300, 'body': {'g': 1, 'q': queue, 'n': 1}},
                {'ttl': 300, 'body': {'g': 1, 'q': queue, 'n': 2},
                 'delay': 0},
                {'ttl': 300, 'body': {'g': 2, 'q': queue, 'n': 3},
                 'delay': 0})
            assert reply.status_code == 201, reply.text
            posted = time.monotonic()
    assert catalogue(server.database, project) == placed
    check_placement(pools, project, placed)
    # Delay and groups on each pool: group 1's head is delayed, so its
    # second message waits behind it; group 2 is free. (Each queue's
    # first post is its delayed message, posted before the others.)
    for queue in placed:
        assert [m['body']['n'] for m in client.claim(queue)] == [3]
        assert client.stats(queue)['delayed'] == 1

    server.stop()
    server.start()
    check_placement(pools, project, placed)
    time.sleep(max(0.0, posted + DELAY + 0.1 - time.monotonic()))
    for queue in placed:
        stats = client.stats(queue)
        assert (stats['total'], stats['claimed']) == (3, 1), (queue, stats)
        assert [m['body']['n'] for m in client.claim(queue)] == [1]


def check_placement(pools, project, placed):
    for queue, pool in placed.items():
        other = [p for p in POOLS if p != pool][0]
        assert keys_of(pools[pool], project, queue), (queue, pool)
        assert not keys_of(pools[other], project, queue), (queue, other)


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


def test_a_pool_with_a_bad_option_answers_503(server,
                                                             redis_pools):
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
