"""Fault-injection history on a real 3-master Redis Cluster.

The producers, consumers, queues and checks of test_redis_history.py,
the driver going through its cluster client
(``delay.redis://h1,h2,h3?cluster=true``). The cluster is the test's own
(localstack/redis_cluster.py: no replicas, append-only file on with
``appendfsync always``, ``cluster-node-timeout`` 2 s). The queues live on
the first two masters (a dead letter crosses from the second to the
first); the third holds none of them, only the queue registry
(``zd:queues``) that every post writes first. A refused call retries
for about 12 s (six attempts of at most ``socket_timeout`` 0.5 s,
``reconnect_sleep`` 0.2 doubling: 6.2 s of sleeps, and a 3 s wait while
the cluster answers CLUSTERDOWN), longer than a master takes to restart
and rejoin here (about 2.5 s). Faults, in rounds
of every kind in a random order:

* ``master_kill_restart`` - SIGKILL any master, restart it at once on its
  port, append-only file and nodes.conf. Calls to its slots meet refused
  connections, then LOADING and CLUSTERDOWN while it rejoins; the
  driver's retries carry them over, including a call whose reply died
  with the master (a pop's batch is kept for its retry).
* ``bystander_down_cluster_fail`` - SIGKILL the third master and keep it
  down until the others have marked it failed and the whole cluster
  answers CLUSTERDOWN, then longer than a refused call retries (see
  ``hold_after_fail``): calls that begin meanwhile fail with storage
  errors (Zaqar answers 503), none of them having run; the workers carry
  on, and succeed once it is back.
* ``master_stall`` - DEBUG SLEEP on a master past the socket timeout: the
  scripts queued behind it run, their replies come too late (a lost reply
  that the driver retries).
* ``drop_connections`` - CLIENT KILL every client connection of every node.
* ``consumer_sigkill`` - SIGKILL a claiming consumer, start a new one.

Not here: a master that holds queues kept down longer than the driver
retries. A pop in flight when it dies has taken its batch and cannot
learn it: the batch is lost (README, "Redis Cluster: failures and
throughput"). No proxy either: a cluster tells its clients the nodes'
own ports. The default run is one round (about 30 s of faults);
``ZAQAR_DELAY_LONG_FAULTS=1`` runs five minutes, and fails until a known
defect is fixed: a pop whose dead letters cannot be copied while the
bystander is down loses its batch (test_cluster_partial_outage.py).
"""

import collections
import json
import os
import random
import time
import uuid

import pytest

from tests.faults import harness
from tests.faults import history
from tests.faults import redis_faults
from tests.faults import workers

pytestmark = pytest.mark.slow

LONG = bool(os.environ.get('ZAQAR_DELAY_LONG_FAULTS'))
SOCKET_TIMEOUT = 0.5
# The driver waits out CLUSTERDOWN for up to loading_wait (15 s by
# default): shorter here, so the outage below outlasts it.
RETRIES = {'max_reconnect_attempts': 5, 'reconnect_sleep': 0.2,
           'loading_wait': 3.0}
STALL_SECONDS = 1.2
# How much longer than a refused call retries the bystander stays down
# once the cluster fails (hold_after_fail).
HOLD_MARGIN_S = 5.0


def hold_after_fail(driver):
    """Seconds the bystander stays down after the cluster failed: longer
    than a call that begins then can retry (its attempts, sleeps and
    CLUSTERDOWN wait: the retry span without its margin for late
    retries), so such calls must fail. (A claim or pop already in doubt
    when the cluster fails keeps retrying about as long: until its kept
    result could expire, 11.7 s after it began here. One that begins
    during the failure is refused, never in doubt.) 10 s, about that
    span, let every worker's call outlast the failure on one CI run.
    """
    from zaqar_delay.drivers.redis import driver as redis_driver
    span_s = (driver.retry_span_ms - redis_driver.RETRY_MARGIN_MS) / 1000
    return span_s + HOLD_MARGIN_S


def spread_queues(cluster, project, suffix):
    """Queue names whose hash tags put ``delayed`` and ``dlq`` on the
    first master, ``grouped`` and ``dead`` on the second: a dead letter
    crosses nodes, and the third master holds no queue."""
    from zaqar_delay.drivers.redis import keys
    queues = {}
    for kind, node in zip(('delayed', 'grouped', 'dead', 'dlq'),
                          (0, 1, 1, 0)):
        for attempt in range(1000):
            name = '{}-{}-{}'.format(kind, suffix, attempt)
            key = keys.queue_keys(name, project)[0]
            if cluster.node_for_key(key) is cluster.nodes[node]:
                queues[kind] = name
                break
    return queues


def error_kinds(directory):
    """Failed calls by outcome and the first words of their error."""
    found = collections.Counter()
    for record in history.load(directory):
        if record.get('err'):
            found['{} {}'.format(record['outcome'],
                                 record['err'][:60])] += 1
    return dict(found.most_common(12))


def begun_during(directory, outages):
    """Outcomes of the calls that began while a master was down (from the
    kill until the cluster was ok again), by outcome."""
    found = collections.Counter()
    for record in history.load(directory):
        if record['op'] != 'fault' and any(
                began <= record['t0'] <= began + back
                for began, _, back in outages):
            found[record['outcome']] += 1
    return dict(found)


def test_history_under_cluster_faults(own_cluster, redis_url, tmp_path):
    from zaqar_delay.drivers.redis import driver as redis_driver
    cluster = own_cluster
    suffix = uuid.uuid4().hex[:6]
    project = 'faults-' + suffix
    spec = {
        'backend': 'redis',
        'uri': cluster.url,
        'control': redis_url,
        'options': dict(RETRIES, socket_timeout=SOCKET_TIMEOUT),
        'project': project,
        'queues': spread_queues(cluster, project, suffix),
    }
    assert len(spec['queues']) == 4
    direct = workers.make_driver(spec)
    pick = random.Random()
    # Per kind: (wall-clock time of the kill, seconds down, seconds until
    # the cluster was ok again).
    outages = collections.defaultdict(list)
    dropped = []

    def kill(kind, pick_node, hold_after_fail):
        def fault():
            began = time.time()
            outages[kind].append((began, *redis_faults.kill_master(
                cluster, pick_node(), hold_after_fail)))
        return fault

    def drop_connections():
        dropped.extend(redis_faults.drop_clients(node.port)
                       for node in cluster.nodes)

    faults = {
        'master_kill_restart': kill(
            'master_kill_restart', lambda: pick.choice(cluster.nodes), None),
        'bystander_down_cluster_fail': kill(
            'bystander_down_cluster_fail', lambda: cluster.nodes[2],
            hold_after_fail(direct)),
        'master_stall': lambda: redis_faults.stall(
            pick.choice(cluster.nodes).port, STALL_SECONDS),
        'drop_connections': drop_connections,
    }
    run = harness.HistoryRun(
        spec, faults, str(tmp_path), duration=300 if LONG else 20,
        producers=3 if LONG else 2, claimers=3 if LONG else 2,
        poppers=2 if LONG else 1,
        gc_patches=[(redis_driver, 'GC_OUTBOX_AGE_MS', 0)])
    pick.seed(run.seed)
    try:
        report = run.run(direct)
    finally:
        direct.close()
    report.pop('all')
    report['master_down_and_back_ok_s'] = {
        kind: [[round(down, 1), round(back, 1)] for _, down, back in found]
        for kind, found in outages.items()}
    report['connections_dropped'] = sum(dropped)
    report['failed_calls'] = error_kinds(str(tmp_path))
    report['calls_begun_in_cluster_failure'] = begun_during(
        str(tmp_path), outages['bystander_down_cluster_fail'])
    text = json.dumps(report, indent=1, sort_keys=True)
    (tmp_path / 'report.json').write_text(text)
    print(text)
    assert all(report['faults'].get(kind) for kind in run.faults)
    assert report['messages']['consumed'] > 0
    # Calls that began while the cluster was down failed with storage
    # errors (503); none with anything else (not_a_storage_error).
    assert report['calls_begun_in_cluster_failure'].get('error'), text
    assert not report['violations'], text
