"""Sticky consumers end to end (issue 23): a real ``zaqar-server`` on a
real redis-server and on the test Swift (and Zaqar's WSGI app on MongoDB,
mongomock in this process unless a real server is set), and
consumer processes with different Client-IDs claiming over REST. While
every consumer stays active, each group's messages are handled by one
client, in order; when a client stops, its groups move to the others
after the sticky time, and nothing is lost or handed out twice."""

import collections
import importlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from tests.integration.conftest import Client
from tests.integration.test_wsgi_retention import patch_metadata
from localstack import redis_server
from localstack import scratch
from localstack import zaqar_server
from localstack.factories import swift as swift_factory
from zaqar_delay.cmd import groups as groups_command

pytestmark = pytest.mark.integration

STICKY_S = 3
# The backends that implement sticky groups (the others refuse them).
STICKY_BACKENDS = ('redis', 'mongodb', 'swift')
GROUPS = ('a', 'b', 'c', 'd')
CONSUMERS = ('alpha', 'beta', 'gamma')


@pytest.fixture
def stack():
    redis = redis_server.RedisServer().start()
    zaqar = zaqar_server.ZaqarServer(
        redis.url, 'delay.redis',
        {'uri': redis.url.replace('redis://', 'delay.redis://')}).start()
    yield zaqar
    zaqar.stop()
    redis.stop()


def store_config(request, backend):
    """A zaqar.conf on ``backend``'s driver (localstack.factories); on
    mongomock the store lives in this process, so what uses it (the WSGI
    app, a command) runs here."""
    factory = importlib.import_module('localstack.factories.' + backend)
    store, options = factory.zaqar_store(request)
    return zaqar_server.write_config(
        scratch.scratch_dir('zd-conf-'),
        request.getfixturevalue('redis_url'), 0, store, options)


@pytest.fixture
def served(request):
    """(Zaqar's own WSGI app served on loopback, its zaqar.conf) on the
    driver the test is parametrized with (``indirect``)."""
    config = store_config(request, request.param)
    app = zaqar_server.WsgiApp(config).start()
    yield app, config
    app.stop()


def records(paths):
    """(client, group, n, href) of every message handled, per client in
    the order it handled them."""
    out = []
    for client, path in paths.items():
        if os.path.exists(path):
            with open(path) as handled:
                out.extend((client, *line.split())
                           for line in handled.read().splitlines())
    return out


def wait_for(paths, count, consumers):
    deadline = time.monotonic() + 120
    while len(records(paths)) < count:
        for process in consumers.values():
            assert process.poll() is None, 'a consumer ended early'
        assert time.monotonic() < deadline, 'the consumers got stuck'
        time.sleep(0.05)
    return records(paths)


def post_round(client, start):
    messages = [{'ttl': 600, 'body': {'g': group, 'n': n}}
                for n in range(start, start + 3) for group in GROUPS]
    assert client.post('jobs', *messages).status_code == 201
    return len(messages)


def owners(handled):
    by_group = collections.defaultdict(set)
    for client, group, _, _ in handled:
        by_group[group].add(client)
    return by_group


def assert_in_order(handled):
    """Each client handled each group's messages in posting order (one
    client per group and round, as owners() checks)."""
    for client in CONSUMERS:
        for group in GROUPS:
            numbers = [int(n) for c, g, n, _ in handled
                       if c == client and g == group]
            assert numbers == sorted(numbers), (client, group, numbers)


def test_groups_stick_to_their_consumer_and_move_when_it_stops(stack,
                                                               tmp_path):
    groups_stick_and_move(stack, tmp_path)


@pytest.mark.parametrize('served', ['mongodb'], indirect=True)
def test_groups_stick_and_move_on_mongodb(served, tmp_path):
    groups_stick_and_move(served[0], tmp_path)


def test_groups_stick_and_move_on_swift(request, tmp_path):
    # A real zaqar-server process, as on Redis (mongomock, above, can only
    # be served from this process).
    store, options = swift_factory.zaqar_store(request)
    zaqar = zaqar_server.ZaqarServer(request.getfixturevalue('redis_url'),
                                     store, options).start()
    try:
        groups_stick_and_move(zaqar, tmp_path)
    finally:
        zaqar.stop()


def groups_stick_and_move(stack, tmp_path):
    producer = Client(stack.url, 'sticky-' + uuid.uuid4().hex[:8])
    assert producer.call('PUT', '/queues/jobs', json={
        '_message_group_key': 'g',
        '_message_group_sticky': STICKY_S}).status_code == 201
    paths = {name: str(tmp_path / name) for name in CONSUMERS}
    consumers = {
        name: subprocess.Popen([
            sys.executable, '-m', 'tests.integration.sticky_consumer',
            stack.url, producer.headers['X-Project-ID'], 'jobs',
            str(uuid.uuid4()), paths[name]])
        for name in CONSUMERS}
    try:
        total = post_round(producer, 0)
        handled = wait_for(paths, total, consumers)
        assert all(len(clients) == 1 for clients in owners(handled).values())
        assert_in_order(handled)

        # The owner of group 'a' stops; its groups move on after the
        # sticky time, each to one other client.
        (stopped,) = owners(handled)['a']
        consumers[stopped].send_signal(signal.SIGTERM)
        assert consumers.pop(stopped).wait(timeout=60) == 0
        total += post_round(producer, 3)
        handled = wait_for(paths, total, consumers)
        after = owners([r for r in handled if int(r[2]) >= 3])
        assert all(len(clients) == 1 and stopped not in clients
                   for clients in after.values())
        assert_in_order(handled)
        hrefs = [href for _, _, _, href in handled]
        assert len(hrefs) == len(set(hrefs)) == total
        assert producer.stats('jobs')['total'] == 0
    finally:
        for process in consumers.values():
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)


def test_sticky_attribute_errors_are_400(stack):
    producer = Client(stack.url, 'sticky-' + uuid.uuid4().hex[:8])
    for bad in ({'_message_group_sticky': 30},
                {'_message_group_key': 'g', '_message_group_sticky': 0}):
        reply = producer.call('PUT', '/queues/bad', json=bad)
        assert reply.status_code == 400, reply.text
        assert '_message_group_sticky' in reply.json()['description']
    assert producer.call('PUT', '/queues/ok', json={
        '_message_group_key': 'g'}).status_code == 201
    reply = patch_metadata(producer, 'ok', '_message_group_sticky', -5)
    assert reply.status_code == 400, reply.text


def test_a_backend_without_sticky_groups_answers_400(client, backend_name):
    """Zaqar's own WSGI app on each backend: where sticky groups are not
    implemented, the attribute is refused, never silently ignored."""
    metadata = {'_message_group_key': 'g', '_message_group_sticky': 30}
    reply = client.call('PUT', '/queues/jobs', json=metadata)
    if backend_name in STICKY_BACKENDS:
        assert reply.status_code == 201, reply.text
        return
    assert reply.status_code == 400, reply.text
    assert 'not implemented' in reply.json()['description']
    assert client.call('PUT', '/queues/jobs', json={
        '_message_group_key': 'g'}).status_code == 201
    reply = patch_metadata(client, 'jobs', '_message_group_sticky', 30)
    assert reply.status_code == 400, reply.text


@pytest.mark.parametrize('served', ['mongodb'], indirect=True)
def test_groups_command_shows_and_unpins_on_mongodb(served, monkeypatch):
    groups_command_shows_and_unpins(*served, monkeypatch)


@pytest.mark.parametrize('served', ['swift'], indirect=True)
def test_groups_command_shows_and_unpins_on_swift(served, monkeypatch):
    groups_command_shows_and_unpins(*served, monkeypatch)


def groups_command_shows_and_unpins(app, config, monkeypatch):
    # Keep pytest's log capture: oslo.log would replace its handler.
    monkeypatch.setattr(groups_command.cmd.logging, 'setup',
                        lambda *args: None)
    producer = Client(app.url, 'sticky-' + uuid.uuid4().hex[:8])
    project = producer.headers['X-Project-ID']
    assert producer.call('PUT', '/queues/jobs', json={
        '_message_group_key': 'g', '_message_group_sticky': 600}
    ).status_code == 201
    producer.post('jobs', *[{'ttl': 600, 'body': {'g': g}}
                            for g in ('a', 'a', 'b')])
    first = Client(app.url, project, str(uuid.uuid4()))
    (message,) = first.claim('jobs', limit=1)
    assert first.call('DELETE', message['href'][len('/v2'):]
                      ).status_code == 204

    def groups(*args):
        out = io.StringIO()
        code = groups_command.main(['--config-file', config, *args],
                                   out=out)
        return code, out.getvalue()

    code, listed = groups('list', project, 'jobs')
    assert code == 0
    worker = first.headers['Client-ID']
    assert [(g['id'], g['client']) for g in map(
        json.loads, listed.splitlines())] == [('a', worker), ('b', None)]
    assert groups('unpin', project, 'jobs', 'a') == (
        0, 'unpinned from {}\n'.format(worker))
    assert groups('unpin', project, 'jobs', 'a') == (0, 'not pinned\n')
    second = Client(app.url, project, str(uuid.uuid4()))
    assert [m['body']['g'] for m in second.claim('jobs')] == ['a', 'b']
