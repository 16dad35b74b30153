"""Fault-injection history on a real redis-server (append-only file on).

Producers and consumers (claiming and popping) run as separate processes
on delayed, grouped and dead-lettering queues, their driver talking to
Redis through a loopback proxy (localstack/tcp_proxy.py) that drops the
reply of a share of the Lua scripts that ran. Meanwhile a fault thread, at
random, SIGKILLs redis-server and restarts it on its append-only file
(``appendfsync always``: an acknowledged write survives), drops every
client connection, stalls Redis with ``DEBUG SLEEP`` past the driver's
socket timeout, and SIGKILLs a claiming consumer (starting a new one).
Every call and its outcome is recorded and checked afterwards (see
tests/faults/history.py for exactly what is checked).

A short run is part of the default suite; ``ZAQAR_DELAY_LONG_FAULTS=1``
runs a long one (more processes, five minutes of faults).
"""

import collections
import hashlib
import json
import os
import time
import uuid

import pytest

from tests.faults import harness
from tests.faults import redis_faults
from tests.faults import store_dump
from tests.faults import workers
from localstack import tcp_proxy

pytestmark = pytest.mark.slow

LONG = bool(os.environ.get('ZAQAR_DELAY_LONG_FAULTS'))
SOCKET_TIMEOUT = 0.5
STALL_SECONDS = 1.2
REPLY_DROP_PROBABILITY = 0.02


def restart(server):
    server.kill()
    time.sleep(0.3)
    # Back once it has read its append-only file again, which grows over
    # the run (seconds, on a loaded machine).
    server.restart(timeout=120)


def script_label(command, names):
    """``claim``, ``claim/pop``, ``post``... for an EVALSHA command."""
    words = tcp_proxy.command_words(command)
    name = names.get(words[1].decode(), words[1].decode()[:8])
    argv = words[3 + int(words[2]):]
    return name + '/pop' if b'pop' in argv else name


def attribute(violations, dropped):
    """Which dropped script replies held the lost messages: a lost message
    whose id was in a swallowed reply was handed out by a script that ran,
    to a caller that never got it."""
    from zaqar_delay.drivers.redis import scripts
    names = {hashlib.sha1(scripts.source(name).encode()).hexdigest(): name
             for name in scripts.QUEUE_SCRIPTS}
    labelled = [(script_label(command, names), reply)
                for _, command, reply in dropped]
    lost_in = collections.Counter()
    for found in violations.get('lost', ()):
        mid = (found['post'] or {}).get('id')
        held = {label for label, reply in labelled
                if mid and mid.encode() in reply}
        lost_in[', '.join(sorted(held)) or 'no dropped reply'] += 1
    return {'dropped_replies_by_script': dict(collections.Counter(
                label for label, _ in labelled)),
            'lost_by_dropped_reply': dict(lost_in)}


def test_history_under_redis_faults(persistent_redis, proxy, tmp_path):
    from zaqar_delay.drivers.redis import driver as redis_driver
    suffix = uuid.uuid4().hex[:6]
    spec = {
        'backend': 'redis',
        'uri': 'delay.redis://127.0.0.1:{}/0'.format(proxy.port),
        'control': persistent_redis.url,
        'options': {'socket_timeout': SOCKET_TIMEOUT},
        'project': 'faults-' + suffix,
        'queues': {kind: '{}-{}'.format(kind, suffix) for kind in
                   ('delayed', 'grouped', 'dead', 'dlq')},
    }
    direct = workers.make_driver(dict(
        spec, uri=persistent_redis.url.replace('redis://', 'delay.redis://')))
    faults = {
        'redis_kill_restart': lambda: restart(persistent_redis),
        'drop_connections': proxy.drop_all,
        'redis_stall': lambda: redis_faults.stall(persistent_redis.port,
                                                  STALL_SECONDS),
    }
    run = harness.HistoryRun(
        spec, faults, str(tmp_path), duration=300 if LONG else 35,
        producers=3 if LONG else 2, claimers=3 if LONG else 2,
        poppers=2 if LONG else 1,
        gc_patches=[(redis_driver, 'GC_OUTBOX_AGE_MS', 0)])
    proxy.drop_reply_probability = REPLY_DROP_PROBABILITY
    try:
        report = run.run(direct)
    finally:
        proxy.drop_reply_probability = 0
        direct.close()
    if report['violations']:
        # The store as the drain left it, to tell why (kept in tmp_path).
        report['store_dump'] = store_dump.dump_queues(
            persistent_redis.port, spec['project'], spec['queues'].values(),
            str(tmp_path / 'store.json'))
    report['faults']['script_reply_dropped'] = proxy.counts['dropped_replies']
    report['faults']['proxy_connections_dropped'] = proxy.counts[
        'dropped_connections']
    report.update(attribute(report.pop('all'), proxy.dropped))
    text = json.dumps(report, indent=1, sort_keys=True)
    (tmp_path / 'report.json').write_text(text)
    print(text)
    assert not proxy.errors
    assert all(report['faults'].get(kind) for kind in run.faults)
    assert report['faults']['script_reply_dropped'] > 0
    assert report['messages']['consumed'] > 0
    assert not report['violations'], text
