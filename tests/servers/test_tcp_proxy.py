"""The fault-injecting TCP proxy, against a real redis-server."""

import socket
import uuid
from urllib import parse

import pytest
import redis
from redis import backoff
from redis import retry

from localstack import tcp_proxy

INCR_SCRIPT = "return redis.call('INCR', KEYS[1])"


@pytest.fixture
def proxy(redis_url):
    proxy = tcp_proxy.TcpProxy(parse.urlparse(redis_url).port).start()
    yield proxy
    proxy.stop()
    assert not proxy.errors


def client(port):
    """A client that never retries on its own, so faults show."""
    return redis.Redis(port=port, socket_timeout=5,
                       retry=retry.Retry(backoff.NoBackoff(), 0))


def test_forwards_commands_and_pipelines(proxy, redis_url):
    via = client(proxy.port)
    key = 'zd-test:' + uuid.uuid4().hex
    via.set(key, b'x' * 200000)
    assert via.get(key) == b'x' * 200000
    with via.pipeline(transaction=False) as pipe:
        pipe.incr(key + ':n').eval(INCR_SCRIPT, 1, key + ':n').get(key + ':n')
        assert pipe.execute() == [1, 2, b'2']


def test_drops_the_reply_of_a_script_that_ran(proxy, redis_url):
    direct = redis.Redis.from_url(redis_url)
    key = 'zd-test:' + uuid.uuid4().hex
    proxy.drop_reply_probability = 1.0
    via = client(proxy.port)
    assert via.incr(key) == 1            # not a script: answered
    with pytest.raises(redis.exceptions.ConnectionError):
        via.eval(INCR_SCRIPT, 1, key)
    assert direct.get(key) == b'2'       # ...but it ran
    assert proxy.counts['dropped_replies'] == 1
    _, command, reply = proxy.dropped[0]
    assert tcp_proxy.command_words(command)[:4] == [
        b'EVAL', INCR_SCRIPT.encode(), b'1', key.encode()]
    assert reply == b':2\r\n'


def test_error_replies_are_passed_on(proxy):
    proxy.drop_reply_probability = 1.0
    with pytest.raises(redis.exceptions.NoScriptError):
        client(proxy.port).evalsha('0' * 40, 0)
    assert proxy.counts['dropped_replies'] == 0


def test_drop_all_closes_open_connections(proxy):
    with socket.create_connection(('127.0.0.1', proxy.port),
                                  timeout=5) as sock:
        sock.sendall(b'PING\r\n')
        assert sock.recv(64) == b'+PONG\r\n'
        proxy.drop_all()
        assert sock.recv(64) == b''      # closed by the proxy
    assert proxy.counts['dropped_connections'] == 1
    assert client(proxy.port).ping()     # a new connection works


def test_a_proxy_that_cannot_listen_says_why(monkeypatch):
    """Tried: both fault proxies when binding a loopback port fails."""
    from localstack import http_proxy

    class NoPorts(socket.socket):
        def bind(self, address):
            raise OSError(99, 'Cannot assign requested address')

    monkeypatch.setattr(tcp_proxy.socket, 'socket', NoPorts)
    with pytest.raises(tcp_proxy.ProxyUnavailable,
                       match=r'TCP fault proxy in front of 127\.0\.0\.1:6399 '
                             r'cannot listen .*Cannot assign requested'):
        tcp_proxy.TcpProxy(6399).start()
    with pytest.raises(http_proxy.ProxyUnavailable,
                       match=r'HTTP fault proxy in front of 127\.0\.0\.1:8099 '
                             r'cannot listen .*Cannot assign requested'):
        http_proxy.HttpProxy(8099)
