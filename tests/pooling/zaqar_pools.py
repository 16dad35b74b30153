"""``zaqar-server`` with ``pooling = True``, driven over HTTP.

As an operator would: Zaqar's sqlalchemy management store on sqlite (Zaqar
23's redis management store cannot register pools), pools registered with
``PUT /v2/pools/<name>``, one flavor per pool so that queues land on a
known pool. ``queues_stay_on_their_pools`` is the end-to-end check that
each backend's test runs with its own way of seeing where a queue's data
is.
"""

import sqlite3
import time
import uuid

import requests
import sqlalchemy

from tests.integration.conftest import Client
from localstack import zaqar_server

POOLS = ('pa', 'pb')
QUEUES_PER_POOL = 3
# Long enough that the first claims run before any delay ends, even on a
# loaded machine.
DELAY = 10


def create_schema(path):
    # Zaqar's alembic migrations speak MySQL only; its sqlalchemy store's
    # own tests create the schema from its table definitions, as here.
    from zaqar.storage.sqlalchemy import tables
    engine = sqlalchemy.create_engine('sqlite:///' + path)
    tables.metadata.create_all(engine)
    engine.dispose()


def start_server(directory, message_store, options=None):
    database = str(directory / 'zaqar.db')
    create_schema(database)
    running = zaqar_server.ZaqarServer(
        None, message_store, options or {},
        management_store='sqlalchemy',
        management_uri='sqlite:///' + database,
        extra='[DEFAULT]\npooling = true\nadmin_mode = true\n').start()
    running.database = database
    return running


def admin(server, method, path, body, project='admin'):
    reply = requests.request(
        method, server.url + '/v2' + path, json=body, timeout=30,
        headers={'X-Project-ID': project, 'Client-ID': str(uuid.uuid4()),
                 'X-Roles': 'admin'})
    assert reply.status_code in (201, 204), (path, reply.status_code,
                                             reply.text)


def register(server, uris):
    for pool, uri in uris.items():
        admin(server, 'PUT', '/pools/' + pool, {'weight': 100, 'uri': uri})


def catalogue(database, project):
    with sqlite3.connect(database) as db:
        return dict(db.execute(
            'SELECT queue, pool FROM Catalogue WHERE project = ?',
            (project,)).fetchall())


def queues_stay_on_their_pools(server, holds):
    """Queues on both pools, each queue's data where its catalogue entry
    says (``holds(pool, project, queue)``), also after a restart; delays
    and groups working on each."""
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
    _check_placement(holds, project, placed)
    # Delay and groups on each pool: group 1's head is delayed, so its
    # second message waits behind it; group 2 is free.
    for queue in placed:
        assert [m['body']['n'] for m in client.claim(queue)] == [3]
        assert client.stats(queue)['delayed'] == 1

    server.stop()
    server.start()
    _check_placement(holds, project, placed)
    time.sleep(max(0.0, posted + DELAY + 0.1 - time.monotonic()))
    for queue in placed:
        stats = client.stats(queue)
        assert (stats['total'], stats['claimed']) == (3, 1), (queue, stats)
        assert [m['body']['n'] for m in client.claim(queue)] == [1]


def _check_placement(holds, project, placed):
    for queue, pool in placed.items():
        other = [p for p in POOLS if p != pool][0]
        assert holds(pool, project, queue), (queue, pool)
        assert not holds(other, project, queue), (queue, other)
