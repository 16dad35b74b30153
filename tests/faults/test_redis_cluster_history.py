"""Fault-injection history on a real 3-master Redis Cluster.

The producers, consumers, queues and checks of test_redis_history.py,
the driver going through its cluster client
(``delay.redis://h1,h2,h3?cluster=true``), the four queues spread over
the three masters (so a dead letter crosses nodes). The cluster is the
test's own (tests/servers/redis_cluster.py, append-only file on with
``appendfsync always``, ``cluster-node-timeout`` 2 s). Faults, at random:

* ``master_kill_restart`` - SIGKILL a master, restart it at once on its
  port, append-only file and nodes.conf; calls to its slots fail with
  connection errors until it answers again.
* ``master_down_cluster_fail`` - SIGKILL a master and keep it down until
  the other masters have marked it failed and the cluster answers
  CLUSTERDOWN on every node, then restart it: every call fails for
  seconds, which the driver's retries cannot bridge, so they reach the
  caller as storage errors (Zaqar answers 503).
* ``master_stall`` - DEBUG SLEEP on a master past the socket timeout: the
  scripts queued behind it run, their replies come too late (a lost reply
  that the driver retries).
* ``drop_connections`` - CLIENT KILL every client connection of every node.
* ``consumer_sigkill`` - SIGKILL a claiming consumer, start a new one.

No proxy: a cluster tells its clients the nodes' own ports.
``ZAQAR_DELAY_LONG_FAULTS=1`` runs a long one.
"""

import collections
import json
import os
import random
import uuid

import pytest

from tests.faults import harness
from tests.faults import redis_faults
from tests.faults import workers

pytestmark = pytest.mark.slow

LONG = bool(os.environ.get('ZAQAR_DELAY_LONG_FAULTS'))
SOCKET_TIMEOUT = 0.5
STALL_SECONDS = 1.2


def spread_queues(cluster, project, suffix):
    """Queue names whose hash tags put ``delayed`` on the first master,
    ``grouped`` on the second, ``dead`` on the third and its ``dlq`` on
    the first: every node holds a queue, a dead letter crosses nodes."""
    from zaqar_delay.drivers.redis import keys
    queues = {}
    for kind, node in zip(('delayed', 'grouped', 'dead', 'dlq'),
                          (0, 1, 2, 0)):
        for attempt in range(1000):
            name = '{}-{}-{}'.format(kind, suffix, attempt)
            key = keys.queue_keys(name, project)[0]
            if cluster.node_for_key(key) is cluster.nodes[node]:
                queues[kind] = name
                break
    return queues


def error_kinds(directory):
    """Failed calls by outcome and the first words of their error."""
    from tests.faults import history
    found = collections.Counter()
    for record in history.load(directory):
        if record.get('err'):
            found['{} {}'.format(record['outcome'],
                                 record['err'][:60])] += 1
    return dict(found.most_common(12))


def test_history_under_cluster_faults(own_cluster, redis_url, tmp_path):
    from zaqar_delay.drivers.redis import driver as redis_driver
    cluster = own_cluster
    suffix = uuid.uuid4().hex[:6]
    project = 'faults-' + suffix
    spec = {
        'backend': 'redis',
        'uri': cluster.url,
        'control': redis_url,
        'options': {'socket_timeout': SOCKET_TIMEOUT},
        'project': project,
        'queues': spread_queues(cluster, project, suffix),
    }
    assert len(spec['queues']) == 4
    direct = workers.make_driver(spec)
    pick = random.Random()
    # Seconds each killed master was down, and until the cluster was ok.
    outages = collections.defaultdict(list)
    dropped = []

    def kill(kind, until_cluster_fails):
        def fault():
            outages[kind].append([round(seconds, 1) for seconds in
                                  redis_faults.kill_master(
                                      cluster, pick.choice(cluster.nodes),
                                      until_cluster_fails)])
        return fault

    def drop_connections():
        dropped.extend(redis_faults.drop_clients(node.port)
                       for node in cluster.nodes)

    faults = {
        'master_kill_restart': kill('master_kill_restart', False),
        'master_down_cluster_fail': kill('master_down_cluster_fail', True),
        'master_stall': lambda: redis_faults.stall(
            pick.choice(cluster.nodes).port, STALL_SECONDS),
        'drop_connections': drop_connections,
    }
    run = harness.HistoryRun(
        spec, faults, str(tmp_path), duration=300 if LONG else 30,
        producers=3 if LONG else 2, claimers=3 if LONG else 2,
        poppers=2 if LONG else 1,
        gc_patches=[(redis_driver, 'GC_OUTBOX_AGE_MS', 0)])
    pick.seed(run.seed)
    try:
        report = run.run(direct)
    finally:
        direct.close()
    report.pop('all')
    report['master_down_and_back_ok_s'] = dict(outages)
    report['connections_dropped'] = sum(dropped)
    report['failed_calls'] = error_kinds(str(tmp_path))
    text = json.dumps(report, indent=1, sort_keys=True)
    (tmp_path / 'report.json').write_text(text)
    print(text)
    assert all(report['faults'].get(kind) for kind in run.faults)
    assert report['messages']['consumed'] > 0
    # The outages were seen: calls failed with storage errors (503), and
    # none with anything else (that would be a not_a_storage_error).
    assert any(kind.endswith(' error') for kind in report['operations'])
    assert not report['violations'], text
