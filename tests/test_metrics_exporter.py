"""``zaqar-delay-gc --metrics_port``: the Prometheus endpoint, scraped over
HTTP while a workload runs on a real Redis, reports what queue stats and
the consumer reports say; per-queue metrics stop at --metrics_max_queues;
the Redis driver's retries and errors are counted by kind."""

import os
import subprocess
import sys
import threading
import time

import pytest
import redis
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.contract.helpers import claim, post
from tests.contract.test_consumers import Reader
from localstack.redis_server import free_port
from tests.test_gc_command import redis_store
from zaqar_delay import errors
from zaqar_delay import exporter
from zaqar_delay import tally
from zaqar_delay.drivers.redis import connection

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEPT = 20   # [retention] length


def scrape(url):
    """{(name, frozenset of labels): value} of one scrape."""
    text = requests.get(url, timeout=10).text
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples}


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())))


def scrape_until(url, done):
    """Scrape until ``done(samples)``; the daemon paces its passes at
    0.1 s, so this waits a few passes at most."""
    deadline = time.monotonic() + 120
    while True:
        try:
            samples = scrape(url)
            if done(samples):
                return samples
        except requests.ConnectionError:
            pass    # not serving yet
        assert time.monotonic() < deadline, 'the daemon never got there'
        time.sleep(0.1)


def passes(samples):
    return value(samples, 'zaqar_delay_gc_passes_total') or 0


@pytest.fixture
def store(own_redis, tmp_path, request):
    return redis_store(own_redis.url, tmp_path, KEPT, request)


def start_daemon(config, port, *flags):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (ROOT, os.environ.get('PYTHONPATH')) if p))
    return subprocess.Popen(
        [sys.executable, '-m', 'zaqar_delay.cmd.gc', '--config-file',
         config, '--metrics_port', str(port), '--full_scan_time', '0.1',
         *flags], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)


def make_queues(driver):
    """Delayed messages, groups in flight, dead letters, a persistent
    consumer that lost messages to retention, and one queue too many."""
    queues = driver.queue_controller
    queues.create('orders', metadata={'_default_message_delay': 600},
                  project='p')
    post(driver, 'orders', 'p', *range(5))
    post(driver, 'orders', 'p', 5, 6, 7, delay=0)
    queues.create('carts', project='p', metadata={
        '_message_group_key': 'cart', '_max_claim_count': 1,
        '_dead_letter_queue': 'carts-dead'})
    post(driver, 'carts', 'p', *({'cart': c, 'n': n}
                                 for c in 'abcd' for n in range(2)))
    claim_id, _ = claim(driver, 'carts', 'p', limit=2)
    driver.claim_controller.delete('carts', claim_id, project='p')
    claim(driver, 'carts', 'p', limit=3)     # 2 heads dead-lettered, 3 taken
    queues.create('events', project='p')
    reader = Reader(driver, 'events', 'p')
    post(driver, 'events', 'p', 'first')
    reader.page(reader.page()[1])            # cursor at 'first'
    post(driver, 'events', 'p', *range(KEPT + 10))
    reader.page()                            # skips what retention dropped
    queues.create('zz-extra', project='p')
    post(driver, 'zz-extra', 'p', 'x')
    return reader


def workload(driver, stop):
    """Posts, claims and deletes on queue 'bulk' until ``stop``."""
    driver.queue_controller.create('bulk', project='p')
    n = 0
    while not stop.is_set():
        post(driver, 'bulk', 'p', *range(n, n + 10))
        n += 10
        claim_id, got = claim(driver, 'bulk', 'p', limit=5)
        for message in got[:3]:
            driver.message_controller.delete('bulk', message['id'],
                                             project='p', claim=claim_id)


def test_the_endpoint_reports_what_stats_say_during_a_workload(store):
    config, driver = store
    reader = make_queues(driver)
    port = free_port()
    url = 'http://127.0.0.1:{}/metrics'.format(port)
    daemon = start_daemon(config, port, '--metrics_max_queues', '5')
    stop = threading.Event()
    worker = threading.Thread(target=workload, args=(driver, stop))
    worker.start()
    try:
        # Scraped while the workload runs: the snapshot follows it.
        first = scrape_until(url, lambda s: value(
            s, 'zaqar_delay_queue_messages', project='p', queue='bulk',
            state='free'))
        scrape_until(url, lambda s: passes(s) >= passes(first) + 2)
    finally:
        stop.set()
        worker.join()
    try:
        # A scrape after the workload stopped shows pass P; the snapshot
        # taken after pass P + 1 began after it, and is served by the time
        # pass P + 2 is counted.
        after = passes(scrape(url))
        samples = scrape_until(url, lambda s: passes(s) >= after + 2)
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
    messages = driver.message_controller
    for queue in ('bulk', 'carts', 'carts-dead', 'events', 'orders'):
        stats = messages.stats(queue, 'p')
        counts = stats['messages']

        def metric(name, **labels):
            return value(samples, 'zaqar_delay_' + name, project='p',
                         queue=queue, **labels)

        for state in ('free', 'delayed', 'claimed'):
            assert metric('queue_messages', state=state) == counts[state], (
                queue, state)
        assert metric('queue_groups') == counts['groups']
        assert metric('queue_groups_in_flight') == counts['groups_in_flight']
        assert metric('queue_retention_removed_total') == \
            stats['retention']['removed']
    # The queues were made so that every family has something to show.
    assert messages.stats('orders', 'p')['messages']['delayed'] == 5
    assert messages.stats('carts', 'p')['messages']['groups_in_flight'] == 3
    dead = messages.stats('carts-dead', 'p')['messages']['total']
    assert dead == 2
    assert value(samples, 'zaqar_delay_queue_dead_letters', project='p',
                 queue='carts') == dead
    report = messages.consumer_report('events', 'p', str(reader.id))
    assert report['lost'] > 0 and report['lag'] > 0
    labels = dict(project='p', queue='events', consumer=str(reader.id))
    assert value(samples, 'zaqar_delay_consumer_lag', **labels) == \
        report['lag']
    assert value(samples, 'zaqar_delay_consumer_lost_total', **labels) == \
        report['lost']
    assert value(samples, 'zaqar_delay_consumer_idle', **labels) == 0
    # Six queues, five exported: the last in (project, queue) order is only
    # counted.
    assert value(samples, 'zaqar_delay_queues', exported='true') == 5
    assert value(samples, 'zaqar_delay_queues', exported='false') == 1
    assert not any(dict(labels).get('queue') == 'zz-extra'
                   for _name, labels in samples)
    # The passes themselves.
    assert value(samples, 'zaqar_delay_gc_last_pass_queues',
                 outcome='visited') == 6
    assert value(samples, 'zaqar_delay_gc_queues_total',
                 outcome='skipped') == 0
    assert value(samples, 'zaqar_delay_gc_removed_total',
                 reason='retention') > 0
    assert value(samples, 'zaqar_delay_gc_interval_seconds') == 0.1
    assert value(samples, 'zaqar_delay_metrics_read_failures') == 0


def test_redis_retries_and_errors_are_counted_by_kind():
    before = tally.snapshot()
    lost = redis.exceptions.ConnectionError('connection lost')
    calls = iter([lost, 'ok'])

    def flaky():
        result = next(calls)
        if isinstance(result, Exception):
            raise result
        return result

    assert connection.guarded(flaky, attempts=2, sleep=0) == 'ok'
    with pytest.raises(errors.BackendUnavailable):
        connection.guarded(flaky_down, attempts=1, sleep=0)
    after = tally.snapshot()

    def grew(*key):
        return after.get(key, 0) - before.get(key, 0)

    assert grew('retry', 'redis', 'ConnectionError') == 2
    assert grew('error', 'redis', 'ConnectionError') == 1
    samples = {(s.name, frozenset(s.labels.items())): s.value
               for family in exporter._fault_families(after)
               for s in family.samples}
    assert samples[('zaqar_delay_store_errors_total', frozenset(
        {'backend': 'redis', 'kind': 'ConnectionError'}.items()))] == \
        after[('error', 'redis', 'ConnectionError')]


def flaky_down():
    raise redis.exceptions.ConnectionError('down')


def test_control_store_errors_are_counted_whatever_the_data_store():
    """metrics.rst said only the Redis driver counts store errors; calls
    into Zaqar's control store count theirs too, under backend control,
    on MongoDB and Swift deployments as well."""
    from zaqar_delay import control_store
    before = tally.snapshot()
    with pytest.raises(errors.BackendUnavailable):
        with control_store.reached():
            raise redis.exceptions.ConnectionError('control down')
    after = tally.snapshot()
    key = ('error', 'control', 'ConnectionError')
    assert after[key] - before.get(key, 0) == 1
    samples = {(s.name, frozenset(s.labels.items())): s.value
               for family in exporter._fault_families(after)
               for s in family.samples}
    assert samples[('zaqar_delay_store_errors_total', frozenset(
        {'backend': 'control', 'kind': 'ConnectionError'}.items()))] == \
        after[key]


def test_a_queue_that_cannot_be_read_is_counted_and_the_rest_exported():
    """metrics.rst: metrics_read_failures counts the queues a snapshot
    could not read; the others are still exported."""
    class Messages:
        def stats(self, queue, project):
            if queue == 'bad':
                raise RuntimeError('boom')
            return {'messages': {'free': 1, 'delayed': 0, 'claimed': 0,
                                 'groups': 0, 'groups_in_flight': 0},
                    'retention': {'removed': 0}}

        def lenient_policy(self, queue, project):
            return type('Policy', (), {'dead_letter_queue': None})()

        def list_consumers(self, queue, project):
            return 0, []

    class Store:
        message_controller = Messages()

        def queues(self):
            return [('p', 'bad'), ('p', 'good')]

    snapshot = exporter.take_snapshot([(None, Store)], 10)
    assert snapshot.failed == 1 and snapshot.known == 2
    assert [sample.queue for sample in snapshot.samples] == ['good']
