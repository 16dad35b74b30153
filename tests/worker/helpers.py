import time

from zaqar_delay.worker import App
from zaqar_delay.worker import Settings

FAST = dict(poll_interval=0.1, retry_delay=1, stats_interval=3600)


def make_app(url, project, metrics=None, **settings):
    return App(url, project=project, prefix='t-',
               settings=Settings(**dict(FAST, **settings)), metrics=metrics)


def wait_for(predicate, timeout=30, step=0.05):
    """Poll ``predicate`` until it is true; its last value either way."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(step)
