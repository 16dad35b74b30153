"""Prometheus metrics of a zaqar-delay store, served by ``zaqar-delay-gc
--metrics_port PORT`` (extra ``zaqar-delay[prometheus]``).

The gc daemon takes a snapshot after each pass, in its own thread, so
metrics never run alongside its pass and a scrape never reaches the store:
it is answered from the last snapshot. A snapshot reads, for at most
``--metrics_max_queues`` queues (the first ones in (project, queue) order;
the others are counted in ``zaqar_delay_queues{exported="false"}``), what
queue stats already keep (``message_controller.stats``), the queue's
metadata, the stats of its dead-letter queue, and each persistent
consumer's report (its lag is the same count as ``GET .../subscriptions/
{id}``). Nothing reads messages one by one.
"""

import dataclasses
import time

import prometheus_client
from oslo_log import log as logging
from prometheus_client import core

from zaqar_delay import tally

LOG = logging.getLogger(__name__)
PREFIX = 'zaqar_delay_'
QUEUE = ['project', 'queue']
CONSUMER = QUEUE + ['consumer']


@dataclasses.dataclass
class QueueSample:
    project: str
    queue: str
    stats: dict
    dead_letters: int = None        # None: the queue has no dead-letter queue
    consumers: dict = dataclasses.field(default_factory=dict)   # id: report


@dataclasses.dataclass
class Snapshot:
    samples: list = dataclasses.field(default_factory=list)
    known: int = 0          # queues the store has
    failed: int = 0         # queues or pools whose reading failed
    seconds: float = 0.0
    taken_at: float = 0.0


def read_queue(store, project, queue):
    """One queue's sample: its stats, its dead-letter queue's depth and its
    persistent consumers' reports."""
    messages = store.message_controller
    sample = QueueSample(project or '', queue, messages.stats(queue, project))
    dead_letter_queue = messages.lenient_policy(
        queue, project).dead_letter_queue
    if dead_letter_queue:
        counts = messages.stats(dead_letter_queue, project)['messages']
        sample.dead_letters = counts['total']
    _now, found = messages.list_consumers(queue, project)
    for consumer in found:
        report = messages.consumer_report(queue, project, consumer.consume_id)
        if report is not None:
            sample.consumers[consumer.consume_id] = report
    return sample


def take_snapshot(stores, max_queues):
    """A Snapshot of ``stores`` ([(pool name or None, a function returning
    its data driver)]); a queue or pool that fails is logged, counted and
    left out."""
    started = time.monotonic()
    snapshot, found = Snapshot(), []
    for pool, get_store in stores:
        try:
            store = get_store()
            found.extend((project or '', queue, store)
                         for project, queue in store.queues())
        except Exception as exc:
            snapshot.failed += 1
            LOG.error('metrics: cannot list the queues of pool %s: %s',
                      pool, exc)
    found.sort(key=lambda entry: entry[:2])
    snapshot.known = len(found)
    for project, queue, store in found[:max_queues]:
        try:
            snapshot.samples.append(
                read_queue(store, project or None, queue))
        except Exception as exc:
            snapshot.failed += 1
            LOG.error('metrics: cannot read queue %r of project %r: %s',
                      queue, project, exc)
    snapshot.seconds = time.monotonic() - started
    snapshot.taken_at = time.time()
    return snapshot


class StoreCollector:
    """Turns the last Snapshot into metric families at scrape time."""

    def __init__(self):
        self.snapshot = None

    def describe(self):
        return []   # families depend on the snapshot: no checks at register

    def collect(self):
        snapshot = self.snapshot
        if snapshot is None:
            return
        yield from _queue_families(snapshot.samples)
        yield from _consumer_families(snapshot.samples)
        queues = gauge('queues', 'Queues in the store, exported per queue '
                       'or not (--metrics_max_queues).', ['exported'])
        exported = len(snapshot.samples)
        queues.add_metric(['true'], exported)
        queues.add_metric(['false'], snapshot.known - exported)
        yield queues
        yield gauge('metrics_read_failures', 'Queues or pools the last '
                    'snapshot could not read.', value=snapshot.failed)
        yield gauge('metrics_read_seconds', 'Seconds the last snapshot took.',
                    value=snapshot.seconds)
        yield gauge('metrics_read_timestamp_seconds', 'When the last '
                    'snapshot was taken (Unix time).', value=snapshot.taken_at)
        yield from _fault_families(tally.snapshot())


def gauge(name, doc, labels=None, value=None):
    return core.GaugeMetricFamily(PREFIX + name, doc, labels=labels,
                                  value=value)


def counter(name, doc, labels=None):
    return core.CounterMetricFamily(PREFIX + name, doc, labels=labels)


def _queue_families(samples):
    by_state = gauge('queue_messages', 'Messages of a queue by state (queue '
                     'stats).', QUEUE + ['state'])
    groups = gauge('queue_groups', 'Message groups with live messages.',
                   QUEUE)
    in_flight = gauge('queue_groups_in_flight',
                      'Message groups whose head is claimed.', QUEUE)
    removed = counter('queue_retention_removed', 'Messages retention removed '
                      'from the queue (queue stats).', QUEUE)
    dead = gauge('queue_dead_letters', 'Messages in the queue\'s dead-letter '
                 'queue (_dead_letter_queue); queues without one are left '
                 'out.', QUEUE)
    for sample in samples:
        labels = [sample.project, sample.queue]
        counts = sample.stats['messages']
        for state in ('free', 'delayed', 'claimed'):
            by_state.add_metric(labels + [state], counts[state])
        groups.add_metric(labels, counts['groups'])
        in_flight.add_metric(labels, counts['groups_in_flight'])
        removed.add_metric(labels, sample.stats['retention']['removed'])
        if sample.dead_letters is not None:
            dead.add_metric(labels, sample.dead_letters)
    return by_state, groups, in_flight, removed, dead


def _consumer_families(samples):
    lag = gauge('consumer_lag', 'Messages retention keeps after a persistent '
                'consumer\'s cursor.', CONSUMER)
    lost = counter('consumer_lost', 'Messages removed before a persistent '
                   'consumer read them.', CONSUMER)
    idle = gauge('consumer_idle', '1 if the persistent consumer is idle '
                 '(it no longer holds retention back).', CONSUMER)
    for sample in samples:
        for consume_id, report in sorted(sample.consumers.items()):
            labels = [sample.project, sample.queue, consume_id]
            lag.add_metric(labels, report['lag'])
            lost.add_metric(labels, report['lost'])
            idle.add_metric(labels, int(report['idle']))
    return lag, lost, idle


def _fault_families(counts):
    families = {event: counter(
        name, 'Store calls of this process ' + doc + ', by backend and '
        'kind (the exception class).', ['backend', 'kind'])
        for event, name, doc in (
            (tally.RETRY, 'store_retries', 'tried again after a fault'),
            (tally.ERROR, 'store_errors', 'given up'))}
    for (event, backend, kind), value in sorted(counts.items()):
        families[event].add_metric([backend, kind], value)
    return families.values()


class Exporter:
    """What ``zaqar-delay-gc --metrics_port`` serves: the store's snapshot
    and the daemon's own passes."""

    def __init__(self, interval):
        self.registry = prometheus_client.CollectorRegistry()
        self.store = StoreCollector()
        self.registry.register(self.store)
        self._server = None

        def metric(kind, name, doc, *labels, **kwargs):
            return kind(PREFIX + 'gc_' + name, doc, labels,
                        registry=self.registry, **kwargs)

        c, g = prometheus_client.Counter, prometheus_client.Gauge
        self.passes = metric(c, 'passes', 'gc passes done.')
        self.failures = metric(c, 'pass_failures', 'gc passes that failed '
                               '(the store unreachable), by error.', 'error')
        self.duration = metric(prometheus_client.Histogram, 'pass_seconds',
                               'Duration of gc passes.', buckets=(
                                   .1, .5, 1, 5, 15, 30, 60, 120, 300, 900,
                                   1800, 3600, float('inf')))
        self.last_duration = metric(g, 'last_pass_seconds',
                                    'Duration of the last gc pass.')
        self.interval = metric(g, 'interval_seconds', 'The pace of gc '
                               'passes ([retention] full_scan_time).')
        self.interval.set(interval)
        self.last_queues = metric(g, 'last_pass_queues', 'Queues the last gc '
                                  'pass visited, by outcome.', 'outcome')
        self.queues = metric(c, 'queues', 'Queues gc visited, by outcome '
                             '(skipped: it failed, left for the next pass).',
                             'outcome')
        self.removed = metric(c, 'removed', 'Messages gc removed, by reason.',
                              'reason')
        self.last_pass = metric(g, 'last_pass_timestamp_seconds',
                                'When the last gc pass ended (Unix time).')
        self.deferred = metric(c, 'passes_deferred', 'gc passes left to '
                               'another host\'s pass (Swift\'s lease).')
        # What the stall alert watches: a daemon that just started, or
        # whose turns go to another host's passes, is not stalled.
        self.last_turn = metric(g, 'last_turn_timestamp_seconds',
                                'When this daemon last ended a gc pass, '
                                'found another host\'s running, or '
                                'started (Unix time).')
        self.last_turn.set_to_current_time()

    def record_pass(self, result, seconds):
        """A pass that succeeded (``result``: driver.GcPass, or None from a
        store that reports nothing)."""
        self.passes.inc()
        self.duration.observe(seconds)
        self.last_duration.set(seconds)
        self.last_pass.set_to_current_time()
        self.last_turn.set_to_current_time()
        if result is None:
            return
        for outcome, count in (('visited', result.queues),
                               ('skipped', result.skipped)):
            self.last_queues.labels(outcome).set(count)
            self.queues.labels(outcome).inc(count)
        self.removed.labels('expired').inc(result.expired)
        self.removed.labels('retention').inc(result.retention)

    def record_deferred(self):
        """Another host's pass was running (errors.GcPassRunning)."""
        self.deferred.inc()
        self.last_turn.set_to_current_time()

    def record_failure(self, exc):
        self.failures.labels(type(exc).__name__).inc()

    def refresh(self, stores, max_queues):
        self.store.snapshot = take_snapshot(stores, max_queues)

    def serve(self, port, addr):
        """Serve ``/metrics`` on a daemon thread; returns the bound port."""
        self._server, _thread = prometheus_client.start_http_server(
            port, addr=addr, registry=self.registry)
        return self._server.server_port
