"""Redis: a control store that cannot answer is a storage error (503).

The driver reads queue metadata from Zaqar's control store (here Zaqar's
own Redis control driver, on a redis-server of the test's own); only the
messages live in the driver's Redis. Zaqar's control driver turns a
redis-py ConnectionError into a storage error but lets a TimeoutError (a
stalled Redis: here SIGSTOPped) through, which Zaqar answers with a 500
(the long fault history saw it as ``not_a_storage_error`` right after
redis-server kills). An error reply of the driver's own Redis, by
contrast, is a storage error too.
"""

import contextlib
import os
import signal

import pytest
import redis as redis_py

from localstack import backends
from localstack import redis_server
from tests.contract.helpers import claim, post
from zaqar_delay import control_store
from zaqar_delay import errors
from zaqar_delay.drivers.redis import driver as redis_driver
from zaqar_delay.drivers.redis import keys


@pytest.fixture
def split_driver(conf, redis_url, own_redis):
    """Messages in the session's Redis, metadata in ``own_redis``."""
    conf.set_override('uri', redis_url.replace('redis://', 'delay.redis://'),
                      group='drivers:message_store:delay.redis')
    data = redis_driver.DataDriver(
        conf, None, backends.control_driver(conf, own_redis.url))
    yield data
    data.close()


@contextlib.contextmanager
def stalled(server):
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.process.pid, signal.SIGCONT)


def test_a_stalled_control_store_fails_calls_with_a_storage_error(
        split_driver, own_redis, project):
    split_driver.queue_controller.create('q', project=project)
    with stalled(own_redis):
        # The metadata copy is empty: the post reads the control store.
        with pytest.raises(errors.BackendUnavailable) as failed:
            post(split_driver, 'q', project, 'a')
    assert isinstance(failed.value.__cause__, redis_py.exceptions.TimeoutError)
    assert "control store" in str(failed.value)
    # Nothing was stored, and the control store back is the queue back.
    post(split_driver, 'q', project, 'b')
    _, messages = claim(split_driver, 'q', project)
    assert [m['body'] for m in messages] == ['b']


def test_an_error_reply_of_the_control_store_is_not_an_outage(
        split_driver, own_redis, project):
    # A WRONGTYPE reply is a damaged store or a bug of ours, not a store
    # that cannot answer now: it stays a plain error (Zaqar: 500), not a
    # 503 that tells the client to retry the same thing.
    from zaqar.storage.redis import utils as zaqar_utils
    split_driver.queue_controller.create('q', project=project)
    raw = redis_py.Redis.from_url(own_redis.url)
    raw.delete(zaqar_utils.scope_queue_name('q', project))
    raw.set(zaqar_utils.scope_queue_name('q', project), 'not a hash')
    with pytest.raises(redis_py.exceptions.ResponseError,
                       match='WRONGTYPE') as failed:
        post(split_driver, 'q', project, 'a')
    assert not isinstance(failed.value, errors.BackendUnavailable)


def test_an_error_reply_of_the_message_store_is_a_503(split_driver,
                                                      redis_url, project):
    # docs/reliability.md: unlike the control store's, any error reply of
    # the driver's own Redis is a storage error (Zaqar: 503), logged.
    split_driver.queue_controller.create('q', project=project)
    post(split_driver, 'q', project, 'a')
    msgs = keys.queue_prefix('q', project) + ':msgs'
    raw = redis_py.Redis.from_url(redis_url)
    raw.delete(msgs)
    raw.set(msgs, 'not a hash')
    with pytest.raises(errors.BackendUnavailable, match='WRONGTYPE'):
        post(split_driver, 'q', project, 'b')
    raw.delete(msgs)


def test_a_read_only_control_store_is_an_outage(own_redis):
    # A control Redis demoted to a replica (a failover) answers READONLY:
    # a 503, like a store that cannot be reached. (Zaqar's own control
    # driver swallows an error reply to the queue creation of ours, so
    # the write is sent here as our calls into it would send it.)
    raw = redis_py.Redis.from_url(own_redis.url)
    raw.replicaof('127.0.0.1', redis_server.free_port())
    try:
        with pytest.raises(errors.BackendUnavailable) as failed:
            with control_store.reached():
                raw.set('k', 'v')
    finally:
        raw.replicaof('NO', 'ONE')
    assert isinstance(failed.value.__cause__,
                      redis_py.exceptions.ReadOnlyError)
