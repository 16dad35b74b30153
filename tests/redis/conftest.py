"""The Redis-only tests use the shared fixtures (driver, clock, make_queue)
on the Redis backend alone."""

import pytest


@pytest.fixture
def backend_name():
    return 'redis'
