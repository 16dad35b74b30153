"""What must not break a worker or change what happens to an event: a
failing metrics sink, an async callable handler, a stats read failing,
a redrive outlasting the handler's retries, bad command-line input
(found by a review on 2026-12-05; each failed before its fix)."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.worker.helpers import make_app
from tests.worker.helpers import wait_for
from zaqar_delay.worker import cli
from zaqar_delay.worker import Metrics

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def _env(zaqar_url, project):
    env = dict(os.environ, ZD_TEST_URL=zaqar_url, ZD_TEST_PROJECT=project,
               ZD_TEST_PREFIX='t-')
    env['PYTHONPATH'] = os.pathsep.join(
        p for p in (ROOT, env.get('PYTHONPATH')) if p)
    return env


# -- 1. a failing metrics sink re-runs (and dead-letters) handled events ---

class BrokenSink(Metrics):
    def handled(self, event_type, seconds):
        raise ConnectionError('statsd unreachable')


def test_failing_metrics_sink_does_not_rehandle_a_handled_event(
        zaqar_url, project):
    app = make_app(zaqar_url, project, metrics=BrokenSink())
    calls = []
    app.add_handler('Paid', lambda event: calls.append(event['n']),
                    max_attempts=2, retry_delay=0)
    app.start()
    try:
        app.enqueue({'n': 1}, type='Paid')
        assert wait_for(lambda: calls, 10)
        time.sleep(4)
        dead = app.dead_letters('Paid')
        total = app.connection.stats('t-Paid')['total']
    finally:
        app.close(5)
    # The handler succeeded: the event must be acknowledged, not run again
    # and not dead-lettered because a metrics backend failed.
    assert (calls, total, dead) == ([1], 0, [])


# -- 2. an async callable that is not a "coroutine function" ---------------

class AsyncHandler:
    def __init__(self):
        self.seen = []

    async def __call__(self, event):
        self.seen.append(event['n'])


def test_async_callable_handler_runs_before_its_event_is_deleted(
        zaqar_url, project):
    app = make_app(zaqar_url, project)
    handler = AsyncHandler()
    app.add_handler('AsyncObj', handler)
    app.start()
    try:
        app.enqueue({'n': 1}, type='AsyncObj')
        ran = wait_for(lambda: handler.seen, 5)
        total = app.connection.stats('t-AsyncObj')['total']
    finally:
        app.close(5)
    # With the bug the coroutine is never awaited, the returned coroutine
    # object counts as success and the event is deleted unhandled.
    assert ran == [1], 'event acknowledged (total=%d) without running' % (
        total)


# -- 3. a failing stats read kills zaqar-delay-worker ----------------------

def test_worker_survives_a_failing_queue_stats_read(zaqar_url, project,
                                                    tmp_path):
    worker = subprocess.Popen(
        [sys.executable, '-m', 'zaqar_delay.worker.cli',
         'tests.worker.apps:flaky_stats_app',
         '--progress-interval', '0.2'],
        cwd=ROOT, env=_env(zaqar_url, project), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        assert worker.stdout.readline().strip() == \
            'zaqar-delay-worker: started'
        time.sleep(3)
        alive = worker.poll() is None
        worker.send_signal(signal.SIGTERM)
        out, _ = worker.communicate(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
    # Claims are retried after errors; a progress tick must not end the
    # worker (it died with a traceback, its handlers never closed).
    assert alive and worker.returncode == 0, out


# -- 4. a full redrive takes back what it just redrove ---------------------

def test_full_redrive_moves_each_dead_letter_once(zaqar_url, project):
    worker = make_app(zaqar_url, project)
    failures = []

    def still_broken(event):
        failures.append(event['n'])
        return False

    worker.add_handler('Loop', still_broken, max_attempts=1, retry_delay=0)
    worker.start()
    redriver = make_app(zaqar_url, project)
    try:
        worker.enqueue({'n': 1}, type='Loop')
        assert wait_for(lambda: worker.dead_letters('Loop'), 20)
        real = redriver.connection.claim
        calls = []

        def claim(*args, **kwargs):
            calls.append(args)
            if len(calls) == 2:
                # Before the redrive's next page: the redriven event failed
                # again and came back to the dead-letter queue, as it does
                # during any redrive that lasts longer than max_attempts x
                # retry_delay with the handler still broken.
                assert wait_for(lambda: worker.dead_letters('Loop'), 20)
                worker.remove_handler('Loop', 5)
            return real(*args, **kwargs)

        redriver.connection.claim = claim
        result = redriver.redrive_report('Loop')
    finally:
        worker.close(5)
    # One dead letter at the start: one move. With the bug the redrive
    # moves the event again (and, while the handler keeps failing fast
    # enough, goes on for ever).
    assert len(result.moved) == 1, (result, failures)


# -- 6. bad command-line input: tracebacks instead of clear errors --------

@pytest.mark.parametrize('spec', ['no_such_module_zd_review:app',
                                  'tests.worker.apps:no_such_app'])
def test_app_spec_naming_nothing_is_a_clear_error(spec):
    with pytest.raises(SystemExit):
        cli.load_app(spec)


def test_dead_letters_command_refuses_a_bad_type_name_clearly(
        zaqar_url, project, monkeypatch):
    for key, value in _env(zaqar_url, project).items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SystemExit):
        cli.dead_letters_main(['tests.worker.apps:base_app', 'list',
                               'Bad.Type'])


@pytest.mark.parametrize('option', [['--log-level', 'bogus'],
                                    ['--progress-interval', '-1']])
def test_worker_refuses_bad_options_clearly(zaqar_url, project, option,
                                            tmp_path):
    log = tmp_path / 'out'
    with open(log, 'wb') as out_file:
        worker = subprocess.Popen(
            [sys.executable, '-m', 'zaqar_delay.worker.cli',
             'tests.worker.apps:base_app'] + option,
            cwd=ROOT, env=_env(zaqar_url, project), stdout=out_file,
            stderr=subprocess.STDOUT)
        try:
            worker.wait(timeout=5)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
            with open(log, 'rb') as read:
                head = read.read(300)
            pytest.fail('worker ran with %s (%d bytes of output): %r' % (
                option, log.stat().st_size, head))
    out = log.read_text()
    assert worker.returncode == 2 and 'Traceback' not in out, out
