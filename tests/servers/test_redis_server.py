"""The test redis-server never passes another server off as its own."""

import itertools
import time

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


def test_a_restart_returns_once_the_data_is_loaded():
    # INFO answers while Redis reads its data back (between chunks of
    # loading-process-events-interval-bytes); every other command gets
    # LOADING. A restart that returned then would hand the fault tests a
    # server that serves nothing yet, and let the next kill land during
    # the load: an outage longer than any fault meant (the long history
    # run saw 28 s). key-load-delay (a debug setting, per key of the RDB
    # part of the append-only file) makes the load last about 2 s.
    server = redis_server.RedisServer(persistent=True, args=[
        '--key-load-delay', '100',
        '--loading-process-events-interval-bytes', '1024']).start()
    try:
        client = redis.Redis(port=server.port)
        client.execute_command('DEBUG', 'POPULATE', 20000)
        client.bgrewriteaof()
        while any(client.info('persistence')[field] for field in (
                'aof_rewrite_in_progress', 'aof_rewrite_scheduled')):
            time.sleep(0.05)
        server.kill()
        server.restart()
        assert client.ping()
        assert client.dbsize() == 20000
    finally:
        server.stop()
