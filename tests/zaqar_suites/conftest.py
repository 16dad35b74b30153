"""Zaqar's own storage and WSGI test suites, run against our drivers.

Zaqar's test classes are unittest classes that read a zaqar.conf named by
their ``config_file`` attribute. The fixture below writes one per test for
the backend a class names (our driver as ``message_store``, Zaqar's Redis
control driver as ``management_store``) and wipes the stores afterwards, as
Zaqar's own tearDowns do for its drivers. Zaqar's tests use fixed project
and queue names, so these tests get a redis-server of their own
(``redis_url`` is overridden here) that can be flushed between tests.
"""

import configparser
import importlib
import os

# Zaqar's WSGI classes are named after MongoDB and skip their setUp unless
# this is set when zaqar.tests.helpers is first imported; the store they
# really use is the one our config file names.
os.environ.setdefault('ZAQAR_TEST_MONGODB', '1')

import pytest  # noqa: E402
import redis  # noqa: E402
import swiftclient  # noqa: E402
from zaqar import tests as zaqar_tests  # noqa: E402

from tests import conftest as shared  # noqa: E402
from localstack import scratch  # noqa: E402
from localstack import zaqar_server  # noqa: E402
from localstack.factories import swift as swift_factory  # noqa: E402


@pytest.fixture(scope='session')
def redis_url():
    for server in shared.redis_session():
        yield server.url


@pytest.fixture(scope='session')
def swift_server():
    """A Swift of their own too: after each test the account is wiped
    whole, which on the shared Swift would also delete every container the
    other tests left there (minutes per wipe)."""
    yield from shared.swift_session()


@pytest.fixture(autouse=True)
def zaqar_config(request, redis_url, monkeypatch):
    """Point the Zaqar test class at a zaqar.conf for its backend."""
    backend = getattr(request.cls, 'backend', None)
    if backend is None:
        yield
        return
    store, options = _store(backend, request, redis_url, monkeypatch)
    directory = scratch.scratch_dir('zd-zaqar-suite-')
    path = zaqar_server.write_config(
        directory, redis_url, 0, store, options,
        transport_options=_transport_options(request.cls.config_file),
        **_mongodb_management(monkeypatch))
    monkeypatch.setattr(request.cls, 'config_file', path)
    yield
    redis.Redis.from_url(redis_url).flushall()
    if backend.endswith('swift'):
        _wipe_swift(request.getfixturevalue('swift_server'))


def _transport_options(zaqar_config_file):
    """The ``[transport]`` limits of the Zaqar config file a suite names
    (its validation suite tests the small bounds its file sets)."""
    if zaqar_config_file is None:
        return {}   # a storage suite: no transport
    parser = configparser.ConfigParser()
    parser.read(os.path.join(os.path.dirname(zaqar_tests.__file__), 'etc',
                             zaqar_config_file))
    if not parser.has_section('transport'):
        return {}
    return {key: value for key, value in parser.items('transport')
            if key not in parser.defaults()}


def _mongodb_management(monkeypatch):
    """Zaqar's MongoDB control driver, its reference management store (on
    mongomock: no server here), as Zaqar's own WSGI suites use; queue
    listing and filtering are the management store's, not ours."""
    from zaqar.storage.mongodb import driver as zaqar_mongodb
    from localstack.factories import mongodb as mongodb_factory
    client = mongodb_factory.StandaloneView(
        mongodb_factory.mongomock_client_factory()(None))
    monkeypatch.setattr(zaqar_mongodb, '_connection', lambda conf: client)
    return {'management_store': 'mongodb',
            'management_uri': 'mongodb://127.0.0.1:27017',
            'unreliable': True}


def _store(backend, request, redis_url, monkeypatch):
    """(message_store, its options) for one of our backends, or for one of
    Zaqar's own drivers (``zaqar-<backend>``) to compare with."""
    if not backend.startswith('zaqar-'):
        factory = importlib.import_module('localstack.factories.' + backend)
        return factory.zaqar_store(request)
    from tests.zaqar_suites import zaqar_drivers
    return zaqar_drivers.store(backend[len('zaqar-'):], request, redis_url,
                               monkeypatch)


def _wipe_swift(server):
    """Delete every container of the test's account. Objects that expire
    (X-Delete-At) meanwhile answer 404, and that is as good as deleted."""
    user, key = swift_factory.account_user(server)
    connection = swiftclient.Connection(authurl=server.auth_url, user=user,
                                        key=key, auth_version='1')
    for container in connection.get_account(full_listing=True)[1]:
        name = container['name']
        for obj in connection.get_container(name, full_listing=True)[1]:
            _ignoring_gone(connection.delete_object, name, obj['name'])
        _ignoring_gone(connection.delete_container, name)
    connection.close()


def _ignoring_gone(call, *args):
    try:
        call(*args)
    except swiftclient.ClientException as exc:
        # 404: already gone; 409: a listing lagged an expired object.
        if exc.http_status not in (404, 409):
            raise
