"""The cluster faults of the history test do what they say."""

import socket

import pytest

from tests.faults import redis_faults
from localstack.redis_cluster import command

pytestmark = pytest.mark.slow


def own_keys(node, count):
    """``count`` key names in ``node``'s slots."""
    found, n = [], 0
    while len(found) < count:
        key = 'k%d' % n
        n += 1
        if int(command(node.port, 'CLUSTER', 'KEYSLOT', key)[1:]) in \
                node.slots:
            found.append(key)
    return found


@pytest.mark.parametrize('hold_after_fail', [None, 0.5])
def test_killed_master_keeps_acknowledged_writes(own_cluster,
                                                 hold_after_fail):
    cluster = own_cluster
    node = cluster.nodes[1]
    written = own_keys(node, 50)
    for key in written:
        assert command(node.port, 'SET', key, 'v') == b'+OK'
    old_pid = node.pid
    outage, _ = redis_faults.kill_master(cluster, node, hold_after_fail)
    assert node.pid != old_pid
    if hold_after_fail is not None:
        # Down until the others marked it failed (cluster-node-timeout),
        # then held.
        assert outage >= cluster.node_timeout_ms / 1000 + hold_after_fail
    assert all(redis_faults.cluster_state(n) == 'ok' for n in cluster.nodes)
    assert all(command(node.port, 'GET', key) == b'v' for key in written)


def test_drop_clients_closes_other_connections(own_cluster):
    port = own_cluster.nodes[0].port
    with socket.create_connection(('127.0.0.1', port), timeout=5) as sock:
        sock.sendall(b'PING\r\n')
        assert sock.recv(16) == b'+PONG\r\n'
        assert redis_faults.drop_clients(port) == 1
        assert sock.recv(16) == b''

