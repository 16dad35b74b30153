"""Fault-injection history on a real single-node Swift.

The same producers, consumers, queues and checks as the Redis history
(test_redis_history.py, tests/faults/history.py), with a lighter load
(every Swift request costs milliseconds). The faults: the Swift proxy
server is SIGKILLed and restarted (requests in flight die with it), and
claiming consumers are SIGKILLed and replaced. Queue metadata stays in
Zaqar's Redis control driver, untouched by faults.

``ZAQAR_DELAY_LONG_FAULTS=1`` runs a long one.
"""

import collections
import json
import os
import uuid

import pytest

from localstack.factories import swift as swift_factory
from tests.faults import harness
from tests.faults import workers

pytestmark = pytest.mark.slow

LONG = bool(os.environ.get('ZAQAR_DELAY_LONG_FAULTS'))


def left_objects(driver, spec, report):
    """The objects of queues the drain could not empty, to tell why."""
    from zaqar_delay.drivers.swift import names
    found = {}
    for queue in report['examples'].get('left_in_store', {}):
        container = names.container(names.MESSAGES, queue, spec['project'])
        found[queue] = [(entry['name'], entry.get('content_type'))
                        for entry in driver.store.listing_all(container, '')]
    return found


def drain_failures(directory):
    """The drain's failed calls, by queue, operation and error."""
    found = collections.Counter()
    path = os.path.join(directory, 'drain.jsonl')
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if record.get('err'):
                found['{} {} {}'.format(record['q'], record['op'],
                                        record['err'][:60])] += 1
    return dict(found.most_common(12))


def test_history_under_swift_faults(swift_server, redis_url, tmp_path):
    from zaqar_delay.drivers.swift import driver as swift_driver
    suffix = uuid.uuid4().hex[:6]
    spec = {
        'backend': 'swift',
        'uri': swift_factory.swift_uri(swift_server),
        'control': redis_url,
        'options': {'timeout': 5.0},
        'project': 'faults-' + suffix,
        'queues': {kind: '{}-{}'.format(kind, suffix) for kind in
                   ('delayed', 'grouped', 'dead', 'dlq')},
        'post_pause': 0.2,
        'idle_pause': 0.2,
    }
    direct = workers.make_driver(spec)
    run = harness.HistoryRun(
        spec, {'swift_proxy_restart': swift_server.restart_proxy},
        str(tmp_path), duration=240 if LONG else 30,
        producers=2 if LONG else 1, claimers=2 if LONG else 1,
        poppers=1, fault_interval=(4.0, 8.0),
        gc_patches=[(swift_driver, 'GC_ABANDONED_S', 0)])
    try:
        report = run.run(direct)
        report.pop('all')
        report['left_objects'] = left_objects(direct, spec, report)
        report['drain_failures'] = drain_failures(str(tmp_path))
    finally:
        direct.close()
    harness.assert_clean(report, run, str(tmp_path))
