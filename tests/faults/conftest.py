"""Fixtures of the fault-injection tests."""

import pytest

from tests.conftest import unavailable
from localstack import redis_cluster
from localstack import redis_server
from localstack import tcp_proxy


@pytest.fixture(scope='module')
def own_cluster():
    """A 3-master Redis Cluster (append-only file, ``appendfsync always``)
    for one test module, never the session's: its masters get killed.
    Each test leaves it ok again."""
    try:
        started = redis_cluster.RedisCluster(masters=3,
                                             appendonly=True).start()
    except redis_server.RedisUnavailable as exc:
        unavailable(str(exc))
    yield started
    started.stop()


@pytest.fixture
def persistent_redis():
    """A redis-server of the test's own (append-only file, ``appendfsync
    always``): it gets killed and restarted on that file."""
    try:
        server = redis_server.RedisServer(persistent=True).start()
    except redis_server.RedisUnavailable as exc:
        unavailable(str(exc))
    yield server
    server.stop()


@pytest.fixture
def proxy(persistent_redis):
    """The loopback fault proxy (localstack/tcp_proxy.py) in front of
    ``persistent_redis``."""
    proxy = tcp_proxy.TcpProxy(persistent_redis.port).start()
    yield proxy
    proxy.stop()
