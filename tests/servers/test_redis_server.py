"""The test redis-server never passes another server off as its own."""

import itertools

import pytest
import redis

from localstack import redis_server


@pytest.fixture
def other():
    server = redis_server.RedisServer().start()
    yield server
    server.stop()


def test_a_port_taken_meanwhile_is_left_for_a_fresh_one(other, monkeypatch):
    # free_port() found the port free, then another server bound it
    # before ours did (as an xdist worker's can).
    fresh = redis_server.free_port
    ports = itertools.chain([other.port], iter(fresh, None))
    monkeypatch.setattr(redis_server, 'free_port', lambda: next(ports))
    with redis_server.RedisServer() as server:
        assert server.port != other.port
        info = redis.Redis(port=server.port).info('server')
        assert info['process_id'] == server.process.pid
        assert redis.Redis(port=other.port).info('server')['process_id'] \
            == other.process.pid


def test_a_port_that_stays_taken_is_an_error_naming_it(other, monkeypatch):
    monkeypatch.setattr(redis_server, 'free_port', lambda: other.port)
    server = redis_server.RedisServer()
    with pytest.raises(redis_server.RedisUnavailable,
                       match='port {} is taken'.format(other.port)):
        server.start()
    assert server.process is None and server.workdir is None  # cleaned up
