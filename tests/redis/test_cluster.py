"""The Redis driver on a real 3-master Redis Cluster (``?cluster=true``).

The contract suite runs on the cluster too (tests/contract/conftest.py);
this module checks what is particular to a cluster: the URI form, queues
spread over every master with every key in its queue's slot, gc reaching
them all, retried calls after a lost reply (the retry tests of
test_retries.py, run here again), scripts loaded again on a node that lost
them, and a master killed and restarted (503 while its slots are down,
nothing lost once it is back).
"""

import re
import time
import uuid

import pytest
import redis as redis_py

from localstack import backends
from tests import conftest
from tests import metadata_copies
from tests.contract.helpers import claim, listed, post
from tests.redis.test_retries import lose_next_reply  # noqa: F401 (fixture)
from tests.redis.test_retries import (  # noqa: F401 (run here again)
    test_a_post_racing_queue_deletion_from_its_start_stays_known_to_gc,
    test_a_post_racing_queue_deletion_stays_known_to_gc,
    test_a_retried_claim_returns_the_batch_it_took,
    test_a_retried_pop_returns_the_batch_it_took,
    test_a_retried_post_does_not_restore_a_deleted_message,
)
from localstack import redis_cluster as cluster_module
from localstack.redis_server import RedisUnavailable
from zaqar_delay import errors as zaqar_delay_errors
from zaqar_delay.drivers.redis import connection
from zaqar_delay.drivers.redis import driver as redis_driver
from zaqar_delay.drivers.redis import keys
from zaqar_delay.drivers.redis import layout

pytestmark = pytest.mark.slow

GROUP = 'drivers:message_store:delay.redis'
# A queue's key, per keys.py: the prefix with its closed hash tag, then a
# suffix; or the queue registry.
TAGGED = re.compile(r'zd:\{[^{}]+\}:')


@pytest.fixture
def backend_name():
    return 'redis_cluster'


@pytest.fixture
def raw(redis_cluster_url):
    """A plain cluster client, beside the driver's."""
    return connection.client_from_uri(redis_cluster_url, 5.0)


def on_node(node, *words):
    return cluster_module.command(node.port, *words)


# -- URI -------------------------------------------------------------------

@pytest.mark.parametrize('uri, message', [
    ('delay.redis://h1,h2?cluster=true&master=m', 'cluster=true and ?master'),
    ('delay.redis://h1?cluster=yes', "cluster='yes' must be true or false"),
    ('delay.redis://h1/2?cluster=true', 'database 2 given'),
    ('delay.redis://h1:6379,:7000?cluster=true', "':7000' names no host"),
    ('delay.redis://h1,h2:x?cluster=true', "'h2:x' is not host[:port]"),
])
def test_bad_cluster_uris_are_refused(uri, message):
    with pytest.raises(ValueError) as raised:
        connection.client_from_uri(uri, 1.0)
    assert message in str(raised.value)


def test_one_seed_finds_every_master(redis_cluster):
    seed = redis_cluster.nodes[1].port
    client = connection.client_from_uri(
        'delay.redis://127.0.0.1:{}?cluster=true'.format(seed), 5.0)
    assert sorted(node.port for node in client.get_primaries()) == sorted(
        node.port for node in redis_cluster.nodes)


def test_replica_acks_are_refused_on_a_cluster(redis_cluster_url, redis_url):
    conf = backends.make_conf(**{GROUP: {'uri': redis_cluster_url,
                                         'replica_acks': 1}})
    with pytest.raises(ValueError) as raised:
        redis_driver.DataDriver(conf, None,
                                backends.control_driver(conf, redis_url))
    assert 'replica_acks = 1 is not supported with Redis Cluster' in str(
        raised.value)


def test_health_reports_the_append_only_file_of_every_master(
        driver, redis_cluster):
    # The session cluster keeps an append-only file on every master.
    assert driver.persistence() == {'aof_enabled': True}
    assert driver.is_alive()
    node = redis_cluster.nodes[2]
    assert on_node(node, 'CONFIG', 'SET', 'appendonly', 'no') == b'+OK'
    try:
        report = driver.persistence()
    finally:
        assert on_node(node, 'CONFIG', 'SET', 'appendonly', 'yes') == b'+OK'
    assert report['aof_enabled'] is False
    assert 'AOF' in report['warning']


# -- placement and gc --------------------------------------------------------

def test_queues_spread_over_every_master_and_gc_reaches_them(
        driver, make_queue, project, clock, redis_cluster, raw):
    queues = [make_queue() for _ in range(24)]
    for queue in queues:
        post(driver, queue, project, 'short', ttl=60)
        post(driver, queue, project, 'long', ttl=600)
    owners = set()
    for queue in queues:
        msgs = keys.queue_keys(queue, project)[0]
        node = redis_cluster.node_for_key(msgs)
        # The queue's keys are on the master that owns its slot.
        assert on_node(node, 'ZCARD', msgs) == b':2'
        owners.add(node.port)
    assert owners == {node.port for node in redis_cluster.nodes}
    clock.advance(61)
    assert driver.gc().expired >= len(queues)
    for queue in queues:
        msgs = keys.queue_keys(queue, project)[0]
        assert raw.zcard(msgs) == 1
        assert [m['body'] for m in listed(driver, queue, project)] == ['long']


def test_every_key_a_workload_leaves_is_in_its_queues_slot(
        driver, make_queue, project, clock, redis_cluster):
    grouped = {'_message_group_key': 'g'}
    dlq, target = make_queue(), make_queue(grouped)
    queue = make_queue(dict(grouped, _max_claim_count=1,
                            _dead_letter_queue=dlq))
    post(driver, queue, project, {'g': 'a'}, {'g': 'a'}, {'g': 'b'},
         {'g': 'c'}, 'plain', delay=0)
    claim_id, claimed = claim(driver, queue, project, ttl=60, limit=1)
    driver.message_controller.delete(queue, claimed[0]['id'],
                                     project=project, claim=claim_id)
    claim(driver, queue, project, ttl=60, limit=1)
    clock.advance(61)
    # The next claim sends the message whose claim expired to the dead
    # letters (another queue, another slot).
    claim(driver, queue, project, ttl=60, limit=1)
    driver.gc()
    assert driver.message_controller.move_group(
        queue, 'c', target, project=project) == 1
    driver.subscription_controller.create(
        queue, 'cursor:' + str(uuid.uuid4()), 3600, {}, project=project)
    listed(driver, queue, project)
    assert listed(driver, dlq, project) and listed(driver, target, project)
    tags = {keys.queue_tag(name, project) for name in (queue, dlq, target)}
    seen = 0
    for node in redis_cluster.nodes:
        for key in on_node(node, 'KEYS', '*').decode().split('\r\n'):
            if key in ('', keys.QUEUE_REGISTRY, layout.LAYOUT_KEY):
                continue
            assert TAGGED.match(key), key
            tag = key[key.index('{') + 1:key.index('}')]
            if tag in tags:
                seen += 1
                assert redis_cluster.node_for_key(key) is node
    assert seen > 20


# -- retries -----------------------------------------------------------------

def test_a_post_whose_reply_is_lost_is_stored_once(driver, project,
                                                   lose_next_reply):
    driver.queue_controller.create('q', project=project)
    lose_next_reply()
    ids = post(driver, 'q', project, 'once', 'twice')
    found = listed(driver, 'q', project, include_claimed=True)
    assert [(m['id'], m['body']) for m in found] == [
        (ids[0], 'once'), (ids[1], 'twice')]


def test_a_stale_cached_policy_is_read_again_on_a_cluster(
        driver, conf, redis_url, project):
    # The generation check runs on the queue's node, and a cluster client
    # reports the script's stale answer as a plain error reply.
    metadata_copies.a_stale_cached_policy_is_read_again(
        driver, redis_driver.DataDriver(
            conf, None, backends.control_driver(conf, redis_url)), project)


def test_scripts_are_loaded_again_on_nodes_that_lost_them(
        driver, project, redis_cluster):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'before')
    for node in redis_cluster.nodes:
        assert on_node(node, 'SCRIPT', 'FLUSH') == b'+OK'
    post(driver, 'q', project, 'after')
    assert [m['body'] for m in claim(driver, 'q', project)[1]] == [
        'before', 'after']


def test_a_rejoining_master_is_waited_out_like_a_loading_one():
    # A restarted master answers CLUSTERDOWN for about two node timeouts
    # while it rejoins; a pop whose reply was lost before the restart must
    # get its retry through, whatever max_reconnect_attempts says.
    calls = []

    def rejoining():
        calls.append(1)
        if len(calls) <= 3:
            raise redis_py.exceptions.ClusterDownError('CLUSTERDOWN')
        return 'done'

    assert connection.guarded(rejoining, 0, 0.0, loading_wait=5.0) == 'done'
    assert len(calls) == 4


def test_cluster_errors_that_say_nothing_ran_are_retried():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) == 1:
            raise redis_py.exceptions.ClusterDownError('CLUSTERDOWN')
        if len(calls) == 2:
            raise redis_py.exceptions.TryAgainError('TRYAGAIN')
        if len(calls) == 3:
            raise redis_py.exceptions.SlotNotCoveredError('slot 7')
        if len(calls) == 4:
            raise redis_py.exceptions.RedisClusterException(
                'Redis Cluster cannot be connected') from \
                redis_py.exceptions.ConnectionError('refused')
        return 'done'

    assert connection.guarded(flaky, 4, 0.0) == 'done'
    assert len(calls) == 5


def test_a_client_side_cluster_mistake_is_not_retried():
    calls = []

    def cross_slot():
        calls.append(1)
        raise redis_py.exceptions.RedisClusterException(
            'keys in request don\'t hash to the same slot')

    with pytest.raises(zaqar_delay_errors.BackendUnavailable):
        connection.guarded(cross_slot, 4, 0.0)
    assert len(calls) == 1


# -- a master killed and restarted -------------------------------------------

@pytest.fixture
def own_cluster():
    try:
        cluster = cluster_module.RedisCluster(node_timeout_ms=500).start()
    except RedisUnavailable as exc:
        conftest.unavailable(str(exc))
    yield cluster
    cluster.stop()


def wait_for(predicate, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError('not within %d s' % timeout)


def cluster_state(node):
    try:
        return on_node(node, 'CLUSTER', 'INFO').split(b'\r\n')[0]
    except OSError:
        return b''


def test_a_dead_master_is_a_503_and_nothing_is_lost_when_it_returns(
        own_cluster, redis_url, project):
    conf = backends.make_conf(**{GROUP: {
        'uri': own_cluster.url, 'socket_timeout': 1.0,
        'reconnect_sleep': 0.05, 'max_reconnect_attempts': 1}})
    driver = redis_driver.DataDriver(conf, None,
                                     backends.control_driver(conf, redis_url))
    try:
        queues = {}
        for n in range(40):
            queue = 'q%d' % n
            driver.queue_controller.create(queue, project=project)
            post(driver, queue, project, 'kept-%d' % n)
            node = own_cluster.node_for_key(
                keys.queue_keys(queue, project)[0])
            queues.setdefault(node.port, []).append(queue)
        victim = own_cluster.nodes[0]
        survivor = own_cluster.nodes[1]
        on_victim, on_survivor = queues[victim.port][0], \
            queues[survivor.port][0]
        victim.stop()
        # The dead master's queues: connection refused, retried, then 503.
        with pytest.raises(zaqar_delay_errors.BackendUnavailable):
            post(driver, on_victim, project, 'lost')
        # Once the others mark it failed, the whole cluster answers
        # CLUSTERDOWN (no replica takes its slots): a 503 too.
        wait_for(lambda: cluster_state(survivor) == b'cluster_state:fail')
        with pytest.raises(zaqar_delay_errors.BackendUnavailable) as raised:
            post(driver, on_survivor, project, 'refused')
        assert 'cluster is down' in str(raised.value)
        assert not driver.is_alive()
        victim.start()
        own_cluster.wait_ok(30)
        post(driver, on_victim, project, 'after')
        assert [m['body'] for m in listed(driver, on_victim, project)] == [
            'kept-%s' % on_victim[1:], 'after']
        assert [m['body'] for m in listed(driver, on_survivor, project)] == [
            'kept-%s' % on_survivor[1:]]
        assert driver.is_alive()
    finally:
        driver.close()
