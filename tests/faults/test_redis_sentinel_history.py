"""Fault-injection history on Redis Sentinel: a master SIGKILLed, its
replica promoted.

The producers, consumers, queues and checks of test_redis_history.py, the
driver given Zaqar's Sentinel URI (localstack/redis_sentinel.py: a
master, a replica, three Sentinels, ``down-after-milliseconds`` 1000).
Replication is asynchronous, so a write the master acknowledged just
before it died can be missing on the replica it fails over to (README,
"Redis Sentinel"); the driver runs with ``replica_acks = 1``, the
documented remedy: every operation is acknowledged once the replica has
its writes, so the history must show nothing lost, nothing twice, as on
one server. That holds only for writes the replica confirms within
``replica_ack_timeout`` (one it does not is acknowledged with a warning,
the loss window the option's help admits), so the test gives it 3 s: at
1 s, on a machine with a load average near 10, a pop and a post sent
a second after the planned failover waited out the whole second
unconfirmed and were lost, with no planned fault after them (most
likely the Sentinels, ``down-after`` 1 s, failed the master over to the
freshly synced replica on their own). The driver retries for about 12 s
(``max_reconnect_attempts`` 6, ``reconnect_sleep`` 0.2), longer than a
failover takes here; ``loading_wait`` is cut to 5 s (no client talks to
a Redis that is loading here) so that the retry span stays below
Zaqar's shortest message ttl, as the driver requires. Faults, in rounds
of every kind in a random order:

* ``master_sigkill_failover`` - SIGKILL the master, wait until the
  Sentinels promote the replica, start a new replica of the new master
  (the next round's failover target);
* ``drop_connections`` - CLIENT KILL every client of the master;
* ``consumer_sigkill`` - SIGKILL a claiming consumer, start a new one.

The default run is one short round, part of the regular suite;
``ZAQAR_DELAY_LONG_FAULTS=1`` runs five minutes.
"""

import os
import uuid

import pytest

from tests.conftest import unavailable
from tests.faults import harness
from tests.faults import redis_faults
from tests.faults import workers
from localstack import redis_sentinel
from localstack.redis_server import RedisUnavailable

pytestmark = pytest.mark.slow

LONG = bool(os.environ.get('ZAQAR_DELAY_LONG_FAULTS'))
OPTIONS = {'socket_timeout': 3.5, 'max_reconnect_attempts': 6,
           'reconnect_sleep': 0.2, 'loading_wait': 5.0, 'replica_acks': 1,
           'replica_ack_timeout': 3.0}


@pytest.fixture
def sentinels():
    try:
        started = redis_sentinel.SentinelSet().start()
    except RedisUnavailable as exc:
        unavailable(str(exc))
    yield started
    started.stop()


def test_history_under_sentinel_failover(sentinels, redis_url, tmp_path):
    from zaqar_delay.drivers.redis import driver as redis_driver
    suffix = uuid.uuid4().hex[:6]
    spec = {
        'backend': 'redis',
        'uri': sentinels.uri,
        'control': redis_url,
        'options': OPTIONS,
        'project': 'faults-' + suffix,
        'queues': {kind: '{}-{}'.format(kind, suffix) for kind in
                   ('delayed', 'grouped', 'dead', 'dlq')},
    }
    direct = workers.make_driver(spec)
    assert direct.retry_span_ms < redis_driver.SHORTEST_TTL_MS
    failovers = []
    faults = {
        'master_sigkill_failover': lambda: failovers.append(
            round(sentinels.fail_over(), 1)),
        'drop_connections': lambda: redis_faults.drop_clients(
            sentinels.master.port),
    }
    run = harness.HistoryRun(
        spec, faults, str(tmp_path), duration=300 if LONG else 8,
        producers=3 if LONG else 1, claimers=3 if LONG else 1,
        poppers=2 if LONG else 1,
        gc_patches=[(redis_driver, 'GC_OUTBOX_AGE_MS', 0)])
    try:
        report = run.run(direct)
    finally:
        direct.close()
    report.pop('all')
    report['failover_s'] = failovers
    harness.assert_clean(report, run, str(tmp_path))
