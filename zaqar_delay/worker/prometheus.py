"""Prometheus metrics for the worker (extra ``zaqar-delay[prometheus]``).

::

    metrics = PrometheusMetrics()
    metrics.serve(9464)          # GET http://127.0.0.1:9464/metrics
    app = App(url, metrics=metrics)
"""

import prometheus_client

from zaqar_delay.worker import metrics as base


class PrometheusMetrics(base.Metrics):
    """Counters per event type, a handler-duration histogram and the queue
    depth gauges, in ``registry`` (a private one by default, so that two
    apps in one process do not clash)."""

    def __init__(self, registry=None, namespace='zaqar_delay_worker'):
        self.registry = registry or prometheus_client.CollectorRegistry()

        def counter(name, doc):
            return prometheus_client.Counter(
                name, doc, ['type'], namespace=namespace,
                registry=self.registry)

        self._enqueued = counter('enqueued', 'Events enqueued.')
        self._handled = counter('handled', 'Events handled successfully.')
        self._failed = counter('failed', 'Handler attempts that failed.')
        self._retried = counter('retried', 'Failed attempts to be retried.')
        self._dead = counter('dead_lettered',
                             'Events whose last attempt failed.')
        self._duration = prometheus_client.Histogram(
            'handler_seconds', 'Handler duration, successful or not.',
            ['type'], namespace=namespace, registry=self.registry)
        self._depth = prometheus_client.Gauge(
            'queue_events', 'Events in the queue by state, from queue stats.',
            ['type', 'state'], namespace=namespace, registry=self.registry)
        self._server = None

    def enqueued(self, event_type, count=1):
        self._enqueued.labels(event_type).inc(count)

    def handled(self, event_type, seconds):
        self._handled.labels(event_type).inc()
        self._duration.labels(event_type).observe(seconds)

    def failed(self, event_type, seconds):
        self._failed.labels(event_type).inc()
        self._duration.labels(event_type).observe(seconds)

    def retried(self, event_type):
        self._retried.labels(event_type).inc()

    def dead_lettered(self, event_type):
        self._dead.labels(event_type).inc()

    def queue_depth(self, event_type, ready, delayed, in_flight, dead):
        for state, value in (('ready', ready), ('delayed', delayed),
                             ('in_flight', in_flight), ('dead', dead)):
            self._depth.labels(event_type, state).set(value)

    def serve(self, port, addr='127.0.0.1'):
        """Serve ``/metrics`` on a daemon thread; returns the bound port."""
        self._server, _thread = prometheus_client.start_http_server(
            port, addr=addr, registry=self.registry)
        return self._server.server_port

    def stop(self):
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
