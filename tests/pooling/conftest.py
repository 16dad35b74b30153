import pytest

from tests import conftest


@pytest.fixture(scope='module')
def second_redis_url():
    """A second redis-server, for a second pool."""
    for server in conftest.own_redis_server():
        yield server.url
