"""The driver's Swift connections read the process environment once, when
each is made (zaqar_delay/drivers/swift/clients.py): a proxy that
``http_proxy`` names is used, and a change to the environment later does
not reach a connection already made, as it did when requests read it
again on every request."""

import uuid

import pytest

from localstack import backends
from localstack import http_proxy
from localstack.factories import swift as swift_factory
from tests.contract.helpers import post
from zaqar_delay.drivers.swift import driver as swift_driver
from zaqar_delay.drivers.swift import names


@pytest.fixture
def forward_proxy(swift_server):
    proxy = http_proxy.HttpProxy(swift_server.proxy_port).start()
    yield proxy
    proxy.stop()


@pytest.fixture
def proxy_environment(monkeypatch):
    """Name a proxy in the environment: ``use(proxy)``."""
    for name in ('no_proxy', 'NO_PROXY', 'http_proxy', 'HTTP_PROXY',
                 'all_proxy', 'ALL_PROXY'):
        monkeypatch.delenv(name, raising=False)
    return lambda proxy: monkeypatch.setenv(
        'http_proxy', 'http://127.0.0.1:{}'.format(proxy.port))


def new_driver(conf, swift_server, redis_url, request):
    conf.set_override('uri', swift_factory.swift_uri(swift_server),
                      group=swift_factory.GROUP)
    made = swift_driver.DataDriver(
        conf, None, backends.control_driver(conf, redis_url))
    request.addfinalizer(made.close)
    return made


def test_a_proxy_the_environment_names_carries_every_storage_request(
        conf, swift_server, redis_url, request, forward_proxy,
        proxy_environment, project):
    proxy_environment(forward_proxy)
    driver = new_driver(conf, swift_server, redis_url, request)
    sent = []
    # The store's first use (auth, the layout version) comes first.
    real_call = driver.store.call
    earlier = len(forward_proxy.forwarded)
    driver.store.call = lambda method, *args, **kwargs: (
        sent.append(method), real_call(method, *args, **kwargs))[1]
    queue = 'q-' + uuid.uuid4().hex[:8]
    driver.queue_controller.create(queue, project=project)
    post(driver, queue, project, 'through the proxy')
    storage = forward_proxy.forwarded[earlier:]
    # Each request the driver sent, from this thread and the pool's,
    # the post's positions and message among them.
    assert len(storage) == len(sent) and 'put_object' in sent, (
        sent, forward_proxy.forwarded)
    assert any('/m/' in path for method, path in storage
               if method == 'PUT'), storage


def test_a_connection_made_keeps_the_environment_it_was_made_in(
        conf, swift_server, redis_url, request, forward_proxy,
        proxy_environment):
    driver = new_driver(conf, swift_server, redis_url, request)
    # This thread's connection is made by its first request.
    driver.store.head(names.LAYOUT_CONTAINER, names.LAYOUT_OBJ)
    proxy_environment(forward_proxy)
    assert driver.store.head(names.LAYOUT_CONTAINER,
                             names.LAYOUT_OBJ) is not None
    # Read on every request, the environment would have sent it through
    # the proxy (requests' default: trust_env).
    assert forward_proxy.forwarded == []
