import importlib
import uuid

import pytest
import requests

from localstack import scratch
from localstack import zaqar_server


@pytest.fixture
def zaqar_url(backend_name, request, operator_config, project):
    """Zaqar's real WSGI app on ``backend_name``, served on loopback, its
    zaqar.conf ending with ``operator_config``."""
    factory = importlib.import_module('localstack.factories.' + backend_name)
    store, options = factory.zaqar_store(request)
    redis_url = request.getfixturevalue('redis_url')
    config = zaqar_server.write_config(
        scratch.scratch_dir('zd-conf-'), redis_url, 0, store, options,
        extra=operator_config.format(project=project))
    app = zaqar_server.WsgiApp(config).start()
    yield app.url
    app.stop()


class Client:
    """A Zaqar v2 client for one project, speaking plain HTTP."""

    def __init__(self, base_url, project, client_id=None):
        self.base = base_url + '/v2'
        self.headers = {'X-Project-ID': project,
                        'Client-ID': client_id or str(uuid.uuid4())}

    def call(self, method, path, **kwargs):
        return requests.request(method, self.base + path,
                                headers=self.headers, timeout=30, **kwargs)

    def post(self, queue, *messages):
        return self.call('POST', '/queues/%s/messages' % queue,
                         json={'messages': list(messages)})

    def bodies(self, queue, **params):
        params.setdefault('echo', 'true')
        reply = self.call('GET', '/queues/%s/messages' % queue,
                          params=params)
        assert reply.status_code == 200, reply.text
        return [m['body'] for m in reply.json()['messages']]

    def claim(self, queue, limit=10, ttl=300, grace=60):
        reply = self.call('POST', '/queues/%s/claims' % queue,
                          params={'limit': limit},
                          json={'ttl': ttl, 'grace': grace})
        assert reply.status_code in (201, 204), reply.text
        return reply.json()['messages'] if reply.status_code == 201 else []

    def stats(self, queue):
        reply = self.call('GET', '/queues/%s/stats' % queue)
        assert reply.status_code == 200, reply.text
        return reply.json()['messages']


@pytest.fixture
def client(zaqar_url, project):
    return Client(zaqar_url, project)
