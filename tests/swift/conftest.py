"""Fixtures of the Swift-only tests: a Swift driver without the backend
parametrization of the contract suite."""

import pytest

from tests import backends
from tests.factories import swift as swift_factory


@pytest.fixture
def swift_driver(request):
    conf = backends.make_conf()
    data_driver = swift_factory.make_driver(request, conf)
    yield data_driver
    data_driver.close()


@pytest.fixture
def swift_clock(swift_driver):
    fake = backends.FakeClock()
    swift_driver.use_clock(fake)
    yield fake
    swift_driver.use_clock(None)


@pytest.fixture
def swift_queue(swift_driver, project):
    def make(metadata=None, name='q'):
        swift_driver.queue_controller.create(name, metadata=metadata or {},
                                             project=project)
        return name
    return make
