"""Starting and stopping an app: racing add_handler calls, a start that
fails half-way, Ctrl-C in run(), and the ttl an event is posted with
(suspected by a review; each test failed before its fix)."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from zaqarclient.transport import errors as transport_errors

from tests.worker.helpers import make_app
from tests.worker.helpers import wait_for
from zaqar_delay.worker import runner
from zaqar_delay.worker import settings as zd_settings

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


@pytest.fixture
def started_runners(monkeypatch):
    """Every TypeRunner the app starts, so a test sees one that the app
    lost track of; any still running are stopped at the end."""
    started = []

    class RecordedRunner(runner.TypeRunner):
        def start(self):
            started.append(self)
            return super().start()

    monkeypatch.setattr(runner, 'TypeRunner', RecordedRunner)
    yield started
    for typed in started:
        if not typed._stopping.is_set():
            typed.stop(1)


def running(started):
    return sorted(r.handler.name for r in started
                  if not r._stopping.is_set())


# -- 1. concurrent add_handler -----------------------------------------------

def test_concurrent_add_handler_of_one_type_leaves_no_runner_behind(
        zaqar_url, project, started_runners, monkeypatch):
    app = make_app(zaqar_url, project)
    app.start()
    # Both calls have removed the earlier handler before either installs
    # its own: the interleaving that lost a runner.
    both_removed = threading.Barrier(2, timeout=30)
    remove = app.remove_handler

    def remove_then_meet(*args, **kwargs):
        done = remove(*args, **kwargs)
        both_removed.wait()
        return done

    monkeypatch.setattr(app, 'remove_handler', remove_then_meet)
    errors = []

    def add(function):
        try:
            app.add_handler('Twice', function)
        except Exception as exc:
            errors.append(exc)

    adders = [threading.Thread(target=add, args=(function,))
              for function in (lambda event: 'first',
                               lambda event: 'second')]
    for adder in adders:
        adder.start()
    for adder in adders:
        adder.join(60)
    try:
        assert errors == [] and len(started_runners) == 2
        assert running(started_runners) == ['Twice']
        assert app._runners['Twice'].handler is app._handlers['Twice']
    finally:
        app.close(5)
    assert running(started_runners) == []


# -- 2. a start that fails half-way ----------------------------------------

def test_a_start_that_fails_half_way_stops_what_it_started(
        zaqar_url, project, started_runners, monkeypatch):
    app = make_app(zaqar_url, project)
    handled = []
    app.add_handler('First', handled.append)
    app.add_handler('Second', handled.append)
    ensure_queue = app.connection.ensure_queue
    failures = ['t-Second-dead']

    def ensure_queue_once_failing(name, metadata):
        if name in failures:
            failures.remove(name)
            raise ConnectionError('zaqar briefly unreachable')
        return ensure_queue(name, metadata)

    monkeypatch.setattr(app.connection, 'ensure_queue',
                        ensure_queue_once_failing)
    with pytest.raises(ConnectionError):
        app.start()
    try:
        # Nothing left running that close() would not know of...
        assert running(started_runners) == []
        # ... and a second start starts every type, once.
        app.start()
        assert running(started_runners) == ['First', 'Second']
        app.enqueue({'n': 2}, type='Second')
        assert wait_for(lambda: handled, 10) == [{'n': 2}]
    finally:
        app.close(5)
    assert running(started_runners) == []


def test_a_handler_added_to_a_running_app_that_cannot_start_is_not_kept(
        zaqar_url, project, started_runners, monkeypatch):
    # Tried: add_handler on a running app while its queues cannot be set
    # up. The error reaches the caller, and the type is not left
    # registered without a runner (it looked handled and took nothing).
    app = make_app(zaqar_url, project)
    handled = []
    app.start()
    ensure_queue = app.connection.ensure_queue
    failures = ['t-Late-dead']

    def ensure_queue_once_failing(name, metadata):
        if name in failures:
            failures.remove(name)
            raise ConnectionError('zaqar briefly unreachable')
        return ensure_queue(name, metadata)

    monkeypatch.setattr(app.connection, 'ensure_queue',
                        ensure_queue_once_failing)
    try:
        with pytest.raises(ConnectionError):
            app.add_handler('Late', handled.append)
        assert 'Late' not in app._handlers
        assert running(started_runners) == []
        # Added again once Zaqar answers: it runs.
        app.add_handler('Late', handled.append)
        assert running(started_runners) == ['Late']
        app.enqueue({'n': 3}, type='Late')
        assert wait_for(lambda: handled, 10) == [{'n': 3}]
    finally:
        app.close(5)
    assert running(started_runners) == []


# -- 3. Ctrl-C in run() ------------------------------------------------------

# Slow handles events one at a time, the first waiting for GO_PATH (so
# others are still claimed but not started when Ctrl-C comes, and close()
# waits for it as long as its third argument says); Other handles what
# it claims. The process ends once GO_PATH exists.
CTRL_C_CHILD = textwrap.dedent('''
    import os
    import signal
    import sys
    import time

    from zaqar_delay.worker import App
    from zaqar_delay.worker import Settings

    # Ctrl-C as in a terminal, even if our parent ignores SIGINT.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    log_path, go_path, close_timeout = sys.argv[1:]
    app = App(os.environ['ZD_TEST_URL'],
              project=os.environ['ZD_TEST_PROJECT'], prefix='t-',
              settings=Settings(poll_interval=0.1,
                                close_timeout=float(close_timeout),
                                stats_interval=3600))


    def write(line):
        with open(log_path, 'a') as log:
            log.write(line + '\\n')


    def slow(event):
        write('start {}'.format(event['n']))
        deadline = time.monotonic() + 60
        while (event['n'] == 0 and not os.path.exists(go_path)
               and time.monotonic() < deadline):
            time.sleep(0.01)
        write('end {}'.format(event['n']))


    app.add_handler('Slow', slow, parallelism=1)
    app.add_handler('Other', lambda event: write('other {}'.format(
        event['n'])))
    try:
        app.run()
    except KeyboardInterrupt:
        write('interrupted')
    deadline = time.monotonic() + 60
    while not os.path.exists(go_path) and time.monotonic() < deadline:
        time.sleep(0.01)
''')


def ctrl_c_child(zaqar_url, project, tmp_path, close_timeout):
    """The CTRL_C_CHILD process, its output going to a file (a pipe
    nobody reads until the end would block the child once its logging
    filled it), and a function that reads that output so far."""
    out_path = tmp_path / 'out'
    env = dict(os.environ, ZD_TEST_URL=zaqar_url, ZD_TEST_PROJECT=project)
    with open(out_path, 'w') as out:
        child = subprocess.Popen(
            [sys.executable, '-c', CTRL_C_CHILD, str(tmp_path / 'log'),
             str(tmp_path / 'go'), close_timeout],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    return child, out_path.read_text


def test_ctrl_c_in_run_closes_the_app(zaqar_url, project, tmp_path):
    log_path, go_path = tmp_path / 'log', tmp_path / 'go'

    def lines():
        return log_path.read_text().splitlines() if log_path.exists() \
            else []

    producer = make_app(zaqar_url, project)
    producer.enqueue_many([{'n': n} for n in range(3)], type='Slow')
    child, output = ctrl_c_child(zaqar_url, project, tmp_path, '0.5')
    try:
        assert wait_for(lambda: 'start 0' in lines(), 30), (lines(),
                                                           output())
        child.send_signal(signal.SIGINT)
        assert wait_for(lambda: 'interrupted' in lines(), 30), (lines(),
                                                               output())
        go_path.touch()
        child.wait(timeout=60)
        out = output()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    stats = producer.connection.stats('t-Slow')
    # close() ran: the events claimed but not started were released, not
    # handled after Ctrl-C.
    assert lines() == ['start 0', 'interrupted', 'end 0'], out
    assert (stats['claimed'], stats['total']) == (0, 2), out
    assert child.returncode == 0, out


def test_a_second_ctrl_c_during_close_leaves_no_type_claiming(
        zaqar_url, project, tmp_path):
    # Tried: Ctrl-C, then Ctrl-C again while close() waits for a running
    # handler of the first type. Every type stopped claiming at the
    # first: an event of another type posted afterwards stays unclaimed.
    log_path, go_path = tmp_path / 'log', tmp_path / 'go'

    def lines():
        return log_path.read_text().splitlines() if log_path.exists() \
            else []

    producer = make_app(zaqar_url, project)
    producer.enqueue({'n': 0}, type='Slow')
    producer.enqueue({'n': 0}, type='Other')
    child, output = ctrl_c_child(zaqar_url, project, tmp_path, '60')
    try:
        # Both types run (a Ctrl-C while start() is still setting one up
        # would leave it unstarted).
        assert wait_for(lambda: {'start 0', 'other 0'} <= set(lines()),
                        30), (lines(), output())
        child.send_signal(signal.SIGINT)
        # close() is now waiting for Slow's handler (60 s allowed).
        time.sleep(1)
        child.send_signal(signal.SIGINT)
        assert wait_for(lambda: 'interrupted' in lines(), 30), (lines(),
                                                               output())
        producer.enqueue({'n': 1}, type='Other')
        # Thirty of Other's polls, had it kept claiming.
        wait_for(lambda: 'other 1' in lines(), 3)
        go_path.touch()
        child.wait(timeout=60)
        out = output()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    stats = producer.connection.stats('t-Other')
    assert sorted(lines()[:2]) == ['other 0', 'start 0'], out
    assert lines()[2:] == ['interrupted', 'end 0'], out
    assert (stats['claimed'], stats['total']) == (0, 1), out


# -- 4. the ttl an event is posted with ---------------------------------------

def test_event_ttl_and_delay_never_exceed_zaqars_max_message_ttl(
        zaqar_url, project):
    longest = make_app(zaqar_url, project, event_ttl=14 * zd_settings.DAY)
    # Zaqar's default max_message_ttl (14 days) refused delay + event_ttl.
    [message_id] = longest.enqueue_many([{'n': 1}], type='Long', delay=600)
    [message] = longest.connection.get_many('t-Long', [message_id])
    assert message.ttl == 1209600
    # Within the bound, an event lives event_ttl after it is due.
    default = make_app(zaqar_url, project)
    [message_id] = default.enqueue_many([{'n': 2}], type='Long', delay=600)
    [message] = default.connection.get_many('t-Long', [message_id])
    assert message.ttl == 600 + 3 * zd_settings.DAY
    # A delay that would leave no time after it is due is refused here.
    with pytest.raises(ValueError, match='delay must be an integer'):
        longest.enqueue({'n': 3}, type='Long', delay=14 * zd_settings.DAY)


def test_a_retry_delay_above_the_servers_max_message_delay_fails_start(
        zaqar_url, project):
    # docs/worker.md: Settings takes it, but it becomes the queue's
    # _redelivery_delay, which the server bounds (900 s by default).
    app = make_app(zaqar_url, project, retry_delay=901)
    app.add_handler('Slow', lambda event: None)
    with pytest.raises(transport_errors.MalformedRequest,
                       match='_redelivery_delay .* 0 to 900 seconds; got '
                             '901') as refused:
        app.start()
    assert refused.value.code == 400
