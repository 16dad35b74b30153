"""Fixtures of the MongoDB-only tests, which use the shared fixtures
(driver, clock, make_queue) on the MongoDB backend alone."""

import sys

import pytest

from localstack.factories import mongodb as mongodb_factory


@pytest.fixture
def backend_name():
    return 'mongodb'


@pytest.fixture
def real_server():
    """The real server's URI; visibly skipped on mongomock."""
    uri = mongodb_factory.real_server_uri()
    if not uri:
        pytest.skip('needs a real MongoDB server: set '
                    + mongodb_factory.URI_ENV)
    return uri


@pytest.fixture
def real(driver, redis_url):
    """(uri, database, redis url) for worker processes on a real server;
    None on mongomock, where the workers are threads."""
    uri = mongodb_factory.real_server_uri()
    if not uri:
        return None
    return uri, driver.store_conf.database, redis_url


@pytest.fixture
def busy_switching():
    """Switch threads often, so mongomock runs really interleave."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)
