"""Apps that ``zaqar-delay-worker`` and ``zaqar-delay-dead-letters`` load in
tests, configured through the environment by the test that starts them."""

import os
import time

from zaqar_delay.worker import App
from zaqar_delay.worker import Settings


def base_app(metrics=None):
    return App(os.environ['ZD_TEST_URL'],
               project=os.environ['ZD_TEST_PROJECT'],
               prefix=os.environ.get('ZD_TEST_PREFIX', ''),
               settings=Settings(poll_interval=0.2, retry_delay=1,
                                 max_attempts=2), metrics=metrics)


def counting_app(metrics=None):
    """Handles ``Tick`` events: appends "<pid> <n>" to $ZD_TEST_LOG."""
    app = base_app(metrics)
    log_path = os.environ['ZD_TEST_LOG']
    pause = float(os.environ.get('ZD_TEST_PAUSE', '0.005'))

    def tick(event):
        time.sleep(pause)
        # One short O_APPEND write per line: lines from several processes
        # never interleave.
        fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, '{} {}\n'.format(os.getpid(), event['n']).encode())
        finally:
            os.close(fd)

    app.add_handler('Tick', tick, parallelism=4)
    return app


def prometheus_app():
    """``counting_app`` with Prometheus metrics, for ``--metrics-port``."""
    from zaqar_delay.worker.prometheus import PrometheusMetrics
    return counting_app(PrometheusMetrics())


def flaky_stats_app():
    """``base_app`` handling ``Tick``, whose queue stats reads fail (as
    during a short Zaqar outage or a 503)."""
    app = base_app()
    app.add_handler('Tick', lambda event: None)

    def stats(name):
        raise ConnectionError('zaqar briefly unreachable')

    app.connection.stats = stats
    return app
