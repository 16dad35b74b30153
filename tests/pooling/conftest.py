import pytest

from tests import conftest


@pytest.fixture(scope='module')
def second_redis_url():
    """A second redis-server, for a second pool."""
    for server in conftest.redis_session():
        yield server.url
