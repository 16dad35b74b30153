"""The cluster fixture: three masters that cover every slot, and a killed
master that comes back on its port with its slots and data."""

import pytest

from localstack import redis_cluster

pytestmark = pytest.mark.slow


def slot_ranges(port):
    """{(first, last)} of every master's slot ranges, as CLUSTER NODES on
    ``port`` lists them."""
    ranges = set()
    for line in redis_cluster.command(
            port, 'CLUSTER', 'NODES').decode().splitlines():
        fields = line.split()
        if 'master' in fields[2]:
            for part in fields[8:]:
                first, _, last = part.partition('-')
                ranges.add((int(first), int(last or first)))
    return ranges


def test_every_slot_is_covered_by_three_masters(redis_cluster_url,
                                                redis_cluster):
    assert len(redis_cluster.nodes) == 3
    assert redis_cluster_url == redis_cluster.url
    assert redis_cluster.url.startswith('delay.redis://127.0.0.1:')
    assert redis_cluster.url.endswith('?cluster=true')
    assert redis_cluster.url.count(',') == 2
    for node in redis_cluster.nodes:
        info = node.info()
        assert b'cluster_state:ok' in info
        assert b'cluster_slots_assigned:16384' in info
        assert b'cluster_known_nodes:3' in info
        covered = set()
        for first, last in slot_ranges(node.port):
            covered.update(range(first, last + 1))
        assert covered == set(range(16384))


def test_a_killed_master_comes_back_with_its_data():
    with redis_cluster.RedisCluster(node_timeout_ms=500) as cluster:
        node = cluster.node_for_key('{zd}k')
        assert redis_cluster.command(node.port, 'SET', '{zd}k', 'v') == b'+OK'
        other = next(n for n in cluster.nodes if n is not node)
        assert redis_cluster.command(
            other.port, 'GET', '{zd}k').startswith(b'-MOVED')
        pid = node.pid
        node.stop()
        assert node.pid == pid  # killed, not forgotten
        node.start()
        assert node.pid != pid
        cluster.wait_ok(30)
        assert redis_cluster.command(node.port, 'GET', '{zd}k') == b'v'
