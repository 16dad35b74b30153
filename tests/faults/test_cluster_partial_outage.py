"""A pop on a Redis Cluster while another master is down.

A claim or pop runs one script on its queue's master, which takes its
batch and detaches the messages past ``_max_claim_count`` into the
queue's outbox; the driver then copies those dead letters into their
queue, a post that first writes the queue registry ``zd:queues``, which
lives on another master. The long cluster history run
(test_redis_cluster_history.py) lost two messages that way: with the
registry's master down, the copy failed, the pop answered 503, and the
batch its script had taken was gone. Nothing else in a pop needs that
master: the outbox exists so that gc finishes such a move later, and now
the pop returns its batch and leaves the move to gc.
"""

import uuid

import pytest

from localstack import backends
from zaqar_delay import errors
from zaqar_delay.drivers.redis import driver as redis_driver
from zaqar_delay.drivers.redis import keys

pytestmark = pytest.mark.slow

GROUP = 'drivers:message_store:delay.redis'


def name_on(cluster, node, project, kind):
    for attempt in range(1000):
        name = '{}-{}'.format(kind, attempt)
        if cluster.node_for_key(keys.queue_keys(name, project)[0]) is node:
            return name
    raise LookupError(node.port)


def test_a_pop_keeps_its_batch_when_its_dead_letters_cannot_move(
        own_cluster, redis_url):
    cluster = own_cluster
    registry = cluster.node_for_key(keys.QUEUE_REGISTRY)
    home = next(node for node in cluster.nodes if node is not registry)
    project = 'partial-' + uuid.uuid4().hex[:6]
    conf = backends.make_conf()
    conf.set_override('uri', cluster.url, group=GROUP)
    # No retries: a refused connection fails at once.
    conf.set_override('max_reconnect_attempts', 0, group=GROUP)
    driver = redis_driver.DataDriver(conf, None,
                                     backends.control_driver(conf, redis_url))
    clock = backends.FakeClock()
    driver.use_clock(clock)
    dlq = name_on(cluster, home, project, 'dlq')
    dead = name_on(cluster, home, project, 'dead')
    driver.queue_controller.create(dlq, project=project)
    driver.queue_controller.create(dead, project=project, metadata={
        '_max_claim_count': 1, '_dead_letter_queue': dlq})
    client = uuid.uuid4()
    messages = driver.message_controller
    messages.post(dead, [{'ttl': 600, 'body': 'a'}], client, project=project)
    _, claimed = driver.claim_controller.create(
        dead, {'ttl': 60, 'grace': 0}, project=project)
    assert [m['body'] for m in claimed] == ['a']
    clock.advance(61)  # its claim expired: 'a' is dead on its next take
    [kept] = messages.post(dead, [{'ttl': 600, 'body': 'b'}], client,
                           project=project)
    registry.stop()
    try:
        try:
            popped = [m['body'] for m in messages.pop(dead, 5,
                                                      project=project)]
        except errors.BackendUnavailable:
            popped = None
    finally:
        registry.start()
        cluster.wait_ok()
    try:
        if popped is None:
            # Failed: then it must not have taken 'b'.
            assert messages.get(dead, kept, project=project)['body'] == 'b'
        else:
            assert popped == ['b']
        # gc finishes moves left in an outbox once they are this old.
        clock.advance(redis_driver.GC_OUTBOX_AGE_MS / 1000 + 1)
        driver.gc()
        assert [m['body'] for m in messages.pop(dlq, 5, project=project)] \
            == ['a']
    finally:
        driver.close()
