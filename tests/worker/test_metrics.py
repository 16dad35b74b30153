"""Metrics: counters and gauges match what happened; Prometheus serves
them in the exposition format."""

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.worker.helpers import make_app
from tests.worker.helpers import wait_for
from zaqar_delay.worker.prometheus import PrometheusMetrics

pytestmark = pytest.mark.integration


def samples(text):
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples}


def test_prometheus_endpoint_reports_what_happened(zaqar_url, project):
    metrics = PrometheusMetrics()
    port = metrics.serve(0)
    app = make_app(zaqar_url, project, metrics=metrics)
    app.add_handler('Good', lambda event: None, parallelism=2)
    app.add_handler('Bad', lambda event: False, max_attempts=2)
    try:
        app.start()
        app.enqueue_many([{'n': n} for n in range(3)], type='Good')
        app.enqueue({'n': 9}, type='Bad')
        app.enqueue({'n': 10}, type='Good', delay=600)
        assert wait_for(lambda: app.dead_letters('Bad'), 20)
        assert wait_for(
            lambda: app.counts.snapshot('Good').get('handled') == 3, 10)
        app.refresh_stats()
        reply = requests.get('http://127.0.0.1:%d/metrics' % port,
                             timeout=10)
    finally:
        app.close(5)
        metrics.stop()
    assert reply.status_code == 200
    assert reply.headers['Content-Type'].startswith('text/plain')
    assert '# TYPE zaqar_delay_worker_handled_total counter' in reply.text
    got = samples(reply.text)

    def value(name, **labels):
        return got[('zaqar_delay_worker_' + name,
                    tuple(sorted(labels.items())))]

    assert value('enqueued_total', type='Good') == 4
    assert value('enqueued_total', type='Bad') == 1
    assert value('handled_total', type='Good') == 3
    assert value('failed_total', type='Bad') == 2
    assert value('retried_total', type='Bad') == 1
    assert value('dead_lettered_total', type='Bad') == 1
    assert value('handler_seconds_count', type='Good') == 3
    assert value('handler_seconds_count', type='Bad') == 2
    assert value('queue_events', type='Good', state='delayed') == 1
    assert value('queue_events', type='Good', state='ready') == 0
    assert value('queue_events', type='Good', state='in_flight') == 0
    assert value('queue_events', type='Bad', state='dead') == 1
    # The in-memory counts behind the progress line agree.
    assert app.counts.snapshot('Bad') == {
        'enqueued': 1, 'failed': 2, 'retried': 1, 'dead_lettered': 1}
    assert 'handled=3 failed=2 retried=1 dead_lettered=1' in app.progress()
