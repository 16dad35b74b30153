"""One ``zaqar-server`` on our Redis driver (real redis-server) for every
worker test; each test gets its own project, so queues never mix."""

import pytest

from localstack import zaqar_server


@pytest.fixture(scope='session')
def zaqar_url(redis_url):
    server = zaqar_server.ZaqarServer(
        redis_url, 'delay.redis',
        {'uri': redis_url.replace('redis://', 'delay.redis://')}).start()
    yield server.url
    server.stop()
