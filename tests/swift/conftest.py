"""The Swift-only tests use the shared fixtures (driver, clock, make_queue)
on the Swift backend alone."""

import pytest


@pytest.fixture
def backend_name():
    return 'swift'
