"""``replica_acks``: an operation is acknowledged once that many replicas
have its writes (Redis WAIT in the same round trip), or after
``replica_ack_timeout`` with a warning."""

import logging
import signal

import pytest
import redis as redis_py

from localstack import backends
from tests import conftest
from tests import metadata_copies
from tests.contract.helpers import claim, listed, post
from localstack import redis_sentinel
from localstack.redis_server import RedisUnavailable
from zaqar_delay.drivers.redis import driver as redis_driver

GROUP = 'drivers:message_store:delay.redis'


@pytest.fixture(scope='module')
def pair():
    try:
        master, replica = redis_sentinel.replicated_pair()
    except RedisUnavailable as exc:
        conftest.unavailable(str(exc))
    yield master, replica
    master.stop()
    replica.stop()


def make_driver(master, redis_url, **options):
    conf = backends.make_conf(**{GROUP: dict(
        uri='delay.redis://127.0.0.1:%d/0' % master.port,
        max_reconnect_attempts=0, **options)})
    return redis_driver.DataDriver(conf, None,
                                   backends.control_driver(conf, redis_url))


def queue_state(server, project, queue):
    """Every key of the queue and its serialized value, on ``server``."""
    client = redis_py.Redis(port=server.port)
    return {key: client.dump(key)
            for key in client.keys('*{%s/%s}*' % (project, queue))}


def test_each_operation_waits_for_the_replica(pair, redis_url, project):
    master, replica = pair
    driver = make_driver(master, redis_url, replica_acks=1,
                         replica_ack_timeout=4.0)
    driver.queue_controller.create('q', project=project)

    def replicated():
        state = queue_state(master, project, 'q')
        return state and state == queue_state(replica, project, 'q')

    post(driver, 'q', project, 'a', 'b')
    assert replicated()
    claim_id, got = claim(driver, 'q', project, limit=1)
    assert replicated()
    driver.message_controller.delete('q', got[0]['id'], project,
                                     claim=claim_id)
    assert replicated()
    assert [m['body'] for m in listed(driver, 'q', project)] == ['b']
    driver.close()


def test_a_stale_cached_policy_is_read_again_when_waiting_for_replicas(
        pair, redis_url, project):
    # With replica_acks a script runs in a pipeline with its WAIT, where
    # redis-py reports a script's error under the pipeline's own wording:
    # the stale answer must still make the call run again, not fail.
    master, _ = pair
    waiting = make_driver(master, redis_url, replica_acks=1,
                          replica_ack_timeout=4.0)
    other = make_driver(master, redis_url)
    metadata_copies.a_stale_cached_policy_is_read_again(other, waiting,
                                                        project)
    waiting.close()
    other.close()


def wait_calls(server):
    stats = redis_py.Redis(port=server.port).info('commandstats')
    return stats.get('cmdstat_wait', {}).get('calls', 0)


def test_every_kind_of_operation_ends_with_a_wait(pair, redis_url, project):
    # Equal master and replica states above could hold on loopback without
    # any WAIT: count the WAITs Redis ran, one per acknowledged operation.
    master, _ = pair
    driver = make_driver(master, redis_url, replica_acks=1,
                         replica_ack_timeout=4.0)
    messages = driver.message_controller
    claims = driver.claim_controller
    driver.queue_controller.create('q', project=project)
    operations = [
        lambda: post(driver, 'q', project, 'a', 'b', 'c', 'd'),
        lambda: claim(driver, 'q', project, limit=1),
        lambda: claims.update('q', claimed[0], {'ttl': 120, 'grace': 60},
                              project=project),
        lambda: claims.delete('q', claimed[0], project=project),
        lambda: messages.pop('q', 1, project=project),
        lambda: messages.bulk_delete('q', [ids[-1]], project=project),
    ]
    claimed, ids = [], []
    for number, operation in enumerate(operations, start=1):
        before = wait_calls(master)
        result = operation()
        if number == 1:
            ids.extend(result)
        if number == 2:
            claimed.append(result[0])
        assert wait_calls(master) == before + 1, number
    driver.close()


def test_an_unconfirmed_write_is_acknowledged_with_a_warning(
        pair, redis_url, project, caplog):
    master, replica = pair
    waiting = make_driver(master, redis_url, replica_acks=1,
                          replica_ack_timeout=0.3)
    plain = make_driver(master, redis_url)
    # The queue is made without waiting: on a loaded machine the replica
    # can take longer than 0.3 s to confirm it, and that warning would be
    # taken for one from the unwaited post below.
    plain.queue_controller.create('q', project=project)
    replica.process.send_signal(signal.SIGSTOP)
    try:
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            post(plain, 'q', project, 'unwaited')
            assert 'WAIT' not in caplog.text
            post(waiting, 'q', project, 'waited')
        assert 'Redis WAIT: 0 of 1 replicas confirmed' in caplog.text
    finally:
        replica.process.send_signal(signal.SIGCONT)
    assert [m['body'] for m in listed(plain, 'q', project)] == [
        'unwaited', 'waited']
    waiting.close()
    plain.close()


def test_ack_timeout_must_be_below_the_socket_timeout(pair, redis_url):
    with pytest.raises(ValueError, match=r'replica_ack_timeout = 5.0 must '
                                         r'be below socket_timeout = 5.0'):
        make_driver(pair[0], redis_url, replica_acks=1,
                    replica_ack_timeout=5.0)
