"""Persistent consumers end to end (issue 11): ``zaqar-server`` on a
redis-server with its append-only file on, python-zaqarclient registering
a ``cursor:`` subscription and a reader process that is killed mid-page
and started again, before and after both servers restart. The reader
resumes after its stored cursor: no message is missed and at most the one
page it was killed in is read twice."""

import os
import signal
import subprocess
import sys
import time
import uuid
from importlib import metadata

import pytest
from zaqarclient.queues import client as zaqar_client

from tests.integration.conftest import Client
from localstack import redis_server
from localstack import zaqar_server

pytestmark = pytest.mark.integration

PAGE = 5
CURSOR_TYPES = """
[transport]
subscriber_types = http,https,mailto,trust+http,trust+https,cursor
"""


@pytest.fixture
def operator_config():
    """Zaqar's WSGI app (``zaqar_url``, every backend) takes cursor
    subscribers."""
    return CURSOR_TYPES


class Stack:
    """redis-server (AOF, fsync always) and zaqar-server on it."""

    def __init__(self):
        self.redis = redis_server.RedisServer(persistent=True).start()
        self.zaqar = zaqar_server.ZaqarServer(
            self.redis.url, 'delay.redis',
            {'uri': self.redis.url.replace('redis://', 'delay.redis://')},
            extra=CURSOR_TYPES).start()

    def restart(self):
        self.zaqar.stop()
        self.redis.restart()
        self.zaqar.start()

    def stop(self):
        self.zaqar.stop()
        self.redis.stop()


@pytest.fixture
def stack():
    # Zaqar looks the subscriber's scheme up among these entry points when
    # a subscription is created (a 503 without it).
    tasks = metadata.entry_points(group='zaqar.notification.tasks')
    assert 'cursor' in tasks.names, (
        'the cursor notification task is not installed: reinstall '
        'zaqar-delay in this venv (scripts/setup.sh)')
    running = Stack()
    yield running
    running.stop()


def client(url, project):
    return zaqar_client.Client(url, version=2, conf={
        'auth_opts': {'backend': 'noauth',
                      'options': {'os_project_id': project}}})


def read(url, project, consume_id, out, stop_after=None):
    """Run the reader; with ``stop_after``, kill it once it has read that
    many bodies (it is then in the middle of a page)."""
    args = [sys.executable, '-m', 'tests.integration.consumer_reader', url,
            project, 'feed', consume_id, str(out), str(PAGE)]
    if stop_after is None:
        subprocess.run(args, check=True, timeout=120)
        return
    before = lines(out)
    reader = subprocess.Popen(args + [str(stop_after)])
    try:
        deadline = time.monotonic() + 120
        while len(lines(out)) < len(before) + stop_after:
            assert reader.poll() is None, 'the reader ended early'
            assert time.monotonic() < deadline, 'the reader got stuck'
            time.sleep(0.05)
    finally:
        os.kill(reader.pid, signal.SIGKILL)
        reader.wait()


def lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as got:
        return [int(line) for line in got.read().split()]


def assert_resumed(seen, expected, killed_at):
    """``seen`` is ``expected`` in order, save that the page the reader was
    killed in (reading its ``killed_at``-th body) may be read twice."""
    assert sorted(set(seen)) == expected
    twice = [n for n in set(seen) if seen.count(n) > 1]
    assert len(twice) <= PAGE
    page_start = (killed_at - 1) // PAGE * PAGE
    assert seen == (expected[:killed_at] + expected[page_start:]
                    if twice else expected)


def test_a_killed_reader_resumes_across_server_restarts(stack, tmp_path):
    project = 'consumers-' + uuid.uuid4().hex[:8]
    consume_id = str(uuid.uuid4())
    producer = client(stack.zaqar.url, project)
    queue = producer.queue('feed')
    queue.ensure_exists()
    subscription = producer.subscription(
        'feed', subscriber='cursor:' + consume_id, ttl=3600, options={})
    assert subscription.id

    out = tmp_path / 'seen'
    queue.post([{'ttl': 3600, 'body': n} for n in range(30)])
    read(stack.zaqar.url, project, consume_id, out, stop_after=12)
    read(stack.zaqar.url, project, consume_id, out)
    assert_resumed(lines(out), list(range(30)), 12)

    second = tmp_path / 'seen-after-restart'
    queue.post([{'ttl': 3600, 'body': n} for n in range(30, 60)])
    read(stack.zaqar.url, project, consume_id, second, stop_after=13)
    stack.restart()
    read(stack.zaqar.url, project, consume_id, second)
    assert_resumed(lines(second), list(range(30, 60)), 13)

    shown = producer.subscription('feed', id=subscription.id,
                                  auto_create=False)
    shown.ensure_exists()
    assert shown.options['lag'] == 0 and shown.options['lost'] == 0
    assert shown.options['idle'] is False


def test_a_consumer_marker_that_is_no_position_is_400_naming_it(
        zaqar_url, project):
    """A persistent consumer listing with a marker that names no position
    gets a 400 naming the marker and its cursor, and nothing changes; a
    plain client listing with it gets Zaqar's empty page."""
    consume_id = str(uuid.uuid4())
    consumer = Client(zaqar_url, project, client_id=consume_id)
    assert consumer.call('PUT', '/queues/feed', json={}).status_code == 201
    reply = consumer.call('POST', '/queues/feed/subscriptions', json={
        'subscriber': 'cursor:' + consume_id, 'ttl': 3600, 'options': {}})
    assert reply.status_code == 201, reply.text
    assert consumer.post('feed', {'ttl': 3600, 'body': 1}).status_code == 201
    assert consumer.bodies('feed') == [1]
    plain = Client(zaqar_url, project)
    for marker in ('abc', '-1', '3x'):
        reply = consumer.call('GET', '/queues/feed/messages',
                              params={'marker': marker})
        assert reply.status_code == 400, (marker, reply.text)
        description = reply.json()['description']
        assert repr(marker) in description and 'cursor' in description
        assert plain.bodies('feed', marker=marker) == []
    # Nothing was acknowledged: the page is handed again.
    assert consumer.bodies('feed') == [1]


# A fixed id with letters in it (parameters are test ids, which every
# xdist worker must collect alike).
SOME_ID = uuid.UUID('0f8738f5-694a-4a54-b936-600821b323ba')


@pytest.mark.parametrize('consume_id', [
    'not-a-uuid', '', str(SOME_ID).upper(), SOME_ID.hex,
    '{' + str(SOME_ID) + '}'],
    ids=['not-a-uuid', 'empty', 'upper-case', 'no-dashes', 'braces'])
def test_a_malformed_cursor_subscriber_is_400_and_nothing_stored(
        client, consume_id):
    """docs/usage.md: a malformed ``cursor:`` subscriber is refused with
    400 and nothing is stored. Tried over Zaqar's REST API, the scheme
    allowed: consume_ids that are no Client-ID in canonical form (a UUID,
    lower case with dashes; consumers.consume_id_of). The 400 names the
    subscriber, so it is not Zaqar refusing the scheme; the subscription
    list stays empty, and the same UUID in canonical form is then
    accepted."""
    assert client.call('PUT', '/queues/feed', json={}).status_code == 201
    subscriber = 'cursor:' + consume_id
    reply = client.call('POST', '/queues/feed/subscriptions', json={
        'subscriber': subscriber, 'ttl': 3600, 'options': {}})
    assert reply.status_code == 400, reply.text
    assert repr(subscriber) in reply.json()['description']
    listing = client.call('GET', '/queues/feed/subscriptions')
    assert listing.status_code == 200, listing.text
    assert listing.json()['subscriptions'] == []
    reply = client.call('POST', '/queues/feed/subscriptions', json={
        'subscriber': 'cursor:' + str(SOME_ID), 'ttl': 3600,
        'options': {}})
    assert reply.status_code == 201, reply.text
