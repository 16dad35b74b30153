"""End to end: ``zaqar-server`` in its own process, configured with our
Redis driver, driven by python-zaqarclient as an application would."""

import time

import pytest
from zaqarclient.queues import client as zaqar_client

from localstack import zaqar_server

pytestmark = pytest.mark.integration


@pytest.fixture(scope='module')
def server(redis_url):
    running = zaqar_server.ZaqarServer(
        redis_url, 'delay.redis',
        {'uri': redis_url.replace('redis://', 'delay.redis://')}).start()
    yield running
    running.stop()


@pytest.fixture
def queues(server, project):
    return zaqar_client.Client(server.url, version=2, conf={
        'auth_opts': {'backend': 'noauth',
                      'options': {'os_project_id': project}}})


def test_delayed_message_and_groups_through_zaqarclient(queues):
    queue = queues.queue('orders', force_create=True)
    queue.metadata(new_meta={'_default_message_delay': 2,
                             '_message_group_key': 'order'})
    queue.post([{'ttl': 300, 'body': {'order': 1, 'step': 'created'}},
                {'ttl': 300, 'body': {'order': 1, 'step': 'paid'},
                 'delay': 0},
                {'ttl': 300, 'body': {'order': 2, 'step': 'created'},
                 'delay': 0}])
    claimed = [m.body for m in queue.claim(ttl=60, grace=60, limit=10)]
    # Order 1's head is delayed, so its later message waits behind it.
    assert claimed == [{'order': 2, 'step': 'created'}]
    time.sleep(2.1)
    claim = queue.claim(ttl=60, grace=60, limit=10)
    got = list(claim)
    assert [m.body for m in got] == [{'order': 1, 'step': 'created'}]
    got[0].delete()
    assert [m.body for m in queue.claim(ttl=60, grace=60, limit=10)] == [
        {'order': 1, 'step': 'paid'}]
    stats = queue.stats['messages']
    assert (stats['total'], stats['claimed'], stats['groups']) == (2, 2, 2)
