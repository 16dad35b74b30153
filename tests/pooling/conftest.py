import pytest

from tests import conftest
from tests.servers import redis_server


@pytest.fixture(scope='module')
def second_redis_url():
    """A second redis-server, for a second pool."""
    try:
        server = redis_server.RedisServer().start()
    except redis_server.RedisUnavailable as exc:
        conftest.unavailable(str(exc))
    yield server.url
    server.stop()
