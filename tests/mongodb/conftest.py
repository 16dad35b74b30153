"""Fixtures of the MongoDB-specific tests: the MongoDB driver only."""

import pytest

from tests import backends
from tests.factories import mongodb as mongodb_factory


@pytest.fixture
def driver(request, conf):
    data_driver = mongodb_factory.make_driver(request, conf)
    yield data_driver
    data_driver.close()


@pytest.fixture
def clock(driver):
    fake = backends.FakeClock()
    driver.use_clock(fake)
    yield fake
    driver.use_clock(None)


@pytest.fixture
def real_server():
    """The real server's URI; visibly skipped on mongomock."""
    uri = mongodb_factory.real_server_uri()
    if not uri:
        pytest.skip('needs a real MongoDB server: set '
                    + mongodb_factory.URI_ENV)
    return uri
