"""A queue whose stored metadata the operator's configuration refuses
since (a lower ``max_message_delay``, a tighter ``[retention]``), through
Zaqar's REST API after a restart with the new zaqar.conf.

Posts and claims answer 400 naming the attribute (api-ref, queues.inc);
a pop takes what is there, so it answers, and Zaqar's queue purge, which
pops, empties the queue. Zaqar answers 503 to any error of a pop.
"""

import importlib

import pytest

from localstack import scratch
from localstack import zaqar_server
from tests.integration.conftest import Client

pytestmark = pytest.mark.integration


@pytest.fixture
def start_app(backend_name, request, project):
    """Start Zaqar's WSGI app with its own zaqar.conf ending in ``extra``,
    every app of a test on the same stores: an operator's restart."""
    factory = importlib.import_module('localstack.factories.' + backend_name)
    store, options = factory.zaqar_store(request)
    redis_url = request.getfixturevalue('redis_url')
    apps = []

    def start(extra='', max_delay=900):
        config = zaqar_server.write_config(
            scratch.scratch_dir('zd-conf-'), redis_url, 0, store,
            options, max_delay=max_delay, extra=extra)
        apps.append(zaqar_server.WsgiApp(config).start())
        return Client(apps[-1].url, project)

    yield start
    for app in apps:
        app.stop()


def pop(client, queue):
    return client.call('DELETE', '/queues/%s/messages' % queue,
                       params={'pop': 5})


def purge(client, queue):
    return client.call('POST', '/queues/%s/purge' % queue,
                       json={'resource_types': ['messages']})


def test_a_delay_above_a_lowered_max_message_delay(start_app):
    before = start_app()
    assert before.call('PUT', '/queues/dq', json={
        '_default_message_delay': 600}).status_code == 201
    assert before.post('dq', {'ttl': 300, 'body': 1, 'delay': 0},
                       {'ttl': 300, 'body': 2, 'delay': 0},
                       {'ttl': 300, 'body': 3, 'delay': 0}
                       ).status_code == 201
    after = start_app(max_delay=60)
    refused = after.post('dq', {'ttl': 300, 'body': 4, 'delay': 0})
    assert refused.status_code == 400, refused.text
    assert '_default_message_delay' in refused.text
    reply = after.call('POST', '/queues/dq/claims', params={'limit': 1},
                       json={'ttl': 60, 'grace': 60})
    assert reply.status_code == 400, reply.text
    popped = pop(after, 'dq')
    assert popped.status_code == 200, popped.text
    assert [m['body'] for m in popped.json()['messages']] == [1, 2, 3]
    assert after.post('dq', {'ttl': 300, 'body': 4}).status_code == 400
    assert purge(after, 'dq').status_code == 204


def test_purge_empties_a_queue_the_lowered_bound_refuses(start_app):
    before = start_app()
    before.call('PUT', '/queues/dq', json={'_redelivery_delay': 600})
    before.post('dq', *[{'ttl': 300, 'body': n} for n in range(3)])
    after = start_app(max_delay=60)
    reply = purge(after, 'dq')
    assert reply.status_code == 204, reply.text
    assert after.stats('dq')['total'] == 0


def test_pop_and_purge_after_the_operator_tightened_retention(start_app):
    before = start_app(extra='[retention]\nlength = 10\n')
    assert before.call('PUT', '/queues/rq', json={
        '_retention': {'length': 8}}).status_code == 201
    before.post('rq', *[{'ttl': 300, 'body': n} for n in range(7)])
    after = start_app(extra='[retention]\nlength = 5\n')
    # The operator's length holds for the pop, as for listings: the two
    # oldest are no longer kept.
    popped = pop(after, 'rq')
    assert popped.status_code == 200, popped.text
    assert [m['body'] for m in popped.json()['messages']] == [2, 3, 4, 5, 6]
    before.post('rq', {'ttl': 300, 'body': 'late'})
    assert purge(after, 'rq').status_code == 204
    assert after.stats('rq')['total'] == 0
