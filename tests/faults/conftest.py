"""Fixtures of the fault-injection tests."""

import pytest

from tests.conftest import unavailable
from localstack import redis_cluster
from localstack import redis_server


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
