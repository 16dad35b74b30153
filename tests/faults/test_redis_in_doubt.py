"""Redis: a claim or pop whose outcome is in doubt is retried for as long
as its result is kept, however many reconnect attempts that takes.

The driver talks to a redis-server of its own (append-only file,
``appendfsync always``) through the loopback proxy. The proxy swallows the
reply of the claim script (it ran: the batch is taken and kept under the
claim id) and SIGKILLs redis-server before serving anything else; Redis
stays down until the call has been refused more times than
``max_reconnect_attempts`` allows, then comes back on its append-only
file. Giving up after the attempts (503) would lose the batch taken.
"""

import hashlib
import threading

import pytest
import redis as redis_py

from tests.contract.helpers import claim, listed, post
from tests.redis.test_retries import check_one_batch_of_two_taken
from localstack import backends
from localstack import redis_server
from localstack import tcp_proxy
from zaqar_delay import errors
from zaqar_delay import tally
from zaqar_delay.drivers.redis import driver as redis_driver
from zaqar_delay.drivers.redis import scripts

pytestmark = pytest.mark.slow

GROUP = 'drivers:message_store:delay.redis'
ATTEMPTS = 1


def driver_on(conf, redis_url, port):
    conf.set_override('uri', 'delay.redis://127.0.0.1:{}/0'.format(port),
                      group=GROUP)
    # The reconnect attempts alone end within about 1 s; the result is
    # kept for the retry span (26.05 s with loading_wait's default 15 s),
    # so a call in doubt is retried for up to 15.55 s.
    conf.set_override('socket_timeout', 0.5, group=GROUP)
    conf.set_override('max_reconnect_attempts', ATTEMPTS, group=GROUP)
    conf.set_override('reconnect_sleep', 0.05, group=GROUP)
    return redis_driver.DataDriver(conf, None,
                                   backends.control_driver(conf, redis_url))


@pytest.fixture
def proxied_driver(conf, redis_url, proxy):
    made = driver_on(conf, redis_url, proxy.port)
    yield made
    made.close()


def is_claim_script(command):
    sha = hashlib.sha1(scripts.source('claim').encode()).hexdigest()
    return tcp_proxy.command_words(command)[1] == sha.encode()


def in_thread(call):
    outcome = {}

    def run():
        try:
            outcome['result'] = call()
        except Exception as exc:
            outcome['error'] = exc
    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def through_an_outage(proxy, server, call):
    """Run ``call()`` with its claim script's reply lost and Redis down
    until the call was refused more often than its attempts allow (or it
    gave up); then its result, or the error it raised."""
    proxy.drop_next_reply(is_claim_script, then=server.kill)
    thread, outcome = in_thread(call)
    while thread.is_alive() and proxy.counts['refused'] <= ATTEMPTS:
        thread.join(0.05)
    server.restart()
    thread.join()
    if 'error' in outcome:
        raise outcome['error']
    return outcome['result']


def test_a_pop_in_doubt_outlasts_its_attempts_and_returns_its_batch(
        proxied_driver, project, proxy, persistent_redis):
    driver = proxied_driver
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a', 'b', 'c', 'd', 'e')
    popped = through_an_outage(
        proxy, persistent_redis,
        lambda: driver.message_controller.pop('q', 2, project=project))
    assert proxy.counts['dropped_replies'] == 1
    assert proxy.counts['refused'] > ATTEMPTS
    assert [m['body'] for m in popped] == ['a', 'b']
    assert [m['body'] for m in listed(driver, 'q', project)] == [
        'c', 'd', 'e']


def test_a_claim_in_doubt_outlasts_its_attempts_and_returns_its_batch(
        proxied_driver, project, proxy, persistent_redis):
    driver = proxied_driver
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a', 'b', 'c', 'd')
    claim_id, messages = through_an_outage(
        proxy, persistent_redis,
        lambda: claim(driver, 'q', project, limit=2))
    assert proxy.counts['refused'] > ATTEMPTS
    check_one_batch_of_two_taken(driver, project, claim_id, messages)


def test_a_pop_refused_before_sending_keeps_its_attempts(
        conf, redis_url, project, persistent_redis):
    # Redis down before the pop: no connection, nothing sent, nothing
    # taken. It fails after max_reconnect_attempts retries, as before.
    driver = driver_on(conf, redis_url, persistent_redis.port)
    try:
        driver.queue_controller.create('q', project=project)
        post(driver, 'q', project, 'a')
        persistent_redis.kill()
        before = tally.snapshot()
        with pytest.raises(errors.BackendUnavailable,
                           match='Connection refused'):
            driver.message_controller.pop('q', 1, project=project)
        retries = tally.snapshot().get(
            (tally.RETRY, 'redis', 'ConnectionError'), 0) - before.get(
            (tally.RETRY, 'redis', 'ConnectionError'), 0)
        assert retries == ATTEMPTS
    finally:
        persistent_redis.restart()
        driver.close()


def test_a_connection_refused_leaves_no_doubt():
    from zaqar_delay.drivers.redis import connection
    client = redis_py.Redis(port=redis_server.free_port(),
                            **connection.NO_RETRY)
    with pytest.raises(redis_py.exceptions.ConnectionError) as refused:
        client.ping()
    assert not connection.maybe_ran(refused.value)
    assert connection.maybe_ran(
        redis_py.exceptions.TimeoutError('Timeout reading from socket'))
