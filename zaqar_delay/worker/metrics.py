"""The worker's metrics interface, a no-op default and an in-memory one.

Every method takes the event type name first. ``queue_depth`` is fed from
Zaqar's queue stats (the seed's "ready for handling" gauge): ``ready`` is
claimable now, ``delayed`` not yet due, ``in_flight`` claimed, ``dead`` in
the type's dead-letter queue. The Prometheus implementation is in
``zaqar_delay.worker.prometheus``.

``retried`` and ``dead_lettered`` are counted when a handler fails: a
failure is the last attempt when this process has seen the event fail
``max_attempts - 1`` times before. Zaqar's REST API does not show a
message's claim count, so with several worker processes on one type a
retry in another process is not seen here: ``dead_lettered`` can then be
undercounted (and ``retried`` overcounted). The ``dead`` gauge, read from
the dead-letter queue's stats, is exact either way.
"""

import collections
import logging
import threading

LOG = logging.getLogger(__name__)


class Metrics:
    """No-op metrics; subclass and override what you record."""

    def enqueued(self, event_type, count=1):
        pass

    def handled(self, event_type, seconds):
        pass

    def failed(self, event_type, seconds):
        pass

    def retried(self, event_type):
        pass

    def dead_lettered(self, event_type):
        pass

    def queue_depth(self, event_type, ready, delayed, in_flight, dead):
        pass


NoopMetrics = Metrics


class CountingMetrics(Metrics):
    """Counters and the latest gauges in memory, for the progress line and
    tests (handler durations go to the histogram of a real backend)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.counts = collections.defaultdict(collections.Counter)
        self.depth = {}

    def _add(self, event_type, counter, count=1):
        with self._lock:
            self.counts[event_type][counter] += count

    def enqueued(self, event_type, count=1):
        self._add(event_type, 'enqueued', count)

    def handled(self, event_type, seconds):
        self._add(event_type, 'handled')

    def failed(self, event_type, seconds):
        self._add(event_type, 'failed')

    def retried(self, event_type):
        self._add(event_type, 'retried')

    def dead_lettered(self, event_type):
        self._add(event_type, 'dead_lettered')

    def queue_depth(self, event_type, ready, delayed, in_flight, dead):
        with self._lock:
            self.depth[event_type] = {'ready': ready, 'delayed': delayed,
                                      'in_flight': in_flight, 'dead': dead}

    def total(self, counter):
        with self._lock:
            return sum(c[counter] for c in self.counts.values())

    def snapshot(self, event_type):
        with self._lock:
            return dict(self.counts[event_type])


class Tee(Metrics):
    """Sends every call to each of several metrics."""

    def __init__(self, *sinks):
        self.sinks = sinks

    def _each(self, name, *args):
        # A sink's failure (its backend away) is logged, never raised:
        # recording must not change what happens to an event.
        for sink in self.sinks:
            try:
                getattr(sink, name)(*args)
            except Exception:
                LOG.exception('metrics sink %r failed on %s', sink, name)

    def enqueued(self, event_type, count=1):
        self._each('enqueued', event_type, count)

    def handled(self, event_type, seconds):
        self._each('handled', event_type, seconds)

    def failed(self, event_type, seconds):
        self._each('failed', event_type, seconds)

    def retried(self, event_type):
        self._each('retried', event_type)

    def dead_lettered(self, event_type):
        self._each('dead_lettered', event_type)

    def queue_depth(self, event_type, ready, delayed, in_flight, dead):
        self._each('queue_depth', event_type, ready, delayed, in_flight,
                   dead)
