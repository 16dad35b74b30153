"""``zaqar-delay-worker`` processes against a live zaqar-server: SIGKILL
and restart lose nothing, SIGTERM closes gracefully; and the dead-letter
operator command."""

import collections
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import requests

from localstack.redis_server import free_port
from tests.worker.helpers import make_app
from tests.worker.helpers import wait_for
from zaqar_delay.worker import cli

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
# ZD_WORKER_LONG=1 runs the kill test on 20,000 events with three kills.
LONG = bool(os.environ.get('ZD_WORKER_LONG'))
EVENTS = 20000 if LONG else 2000
KILLS = 3 if LONG else 1
PARALLELISM = 4     # tests.worker.apps.counting_app


@pytest.fixture
def environment(zaqar_url, project, tmp_path):
    env = dict(os.environ, ZD_TEST_URL=zaqar_url, ZD_TEST_PROJECT=project,
               ZD_TEST_PREFIX='t-', ZD_TEST_LOG=str(tmp_path / 'handled'))
    env['PYTHONPATH'] = os.pathsep.join(
        p for p in (ROOT, env.get('PYTHONPATH')) if p)
    return env


def start_worker(env, tmp_path, name):
    out = open(tmp_path / (name + '.out'), 'wb')
    return name, subprocess.Popen(
        [sys.executable, '-m', 'zaqar_delay.worker.cli',
         'tests.worker.apps:counting_app', '--progress-interval', '1'],
        cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def handled_lines(env):
    try:
        with open(env['ZD_TEST_LOG']) as log:
            return [line.split() for line in log.read().splitlines()]
    except FileNotFoundError:
        return []


def test_two_workers_survive_sigkill_and_restart(environment, zaqar_url,
                                                 project, tmp_path):
    producer = make_app(zaqar_url, project)
    producer.enqueue_many([{'n': n} for n in range(EVENTS)], type='Tick')
    workers = [start_worker(environment, tmp_path, 'a'),
               start_worker(environment, tmp_path, 'b')]
    killed = set()
    try:
        for round_ in range(KILLS):
            target = len(handled_lines(environment)) + EVENTS // (KILLS + 2)
            assert wait_for(
                lambda: len(handled_lines(environment)) >= target, 120)
            _, victim = workers.pop(0)
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            killed.add(str(victim.pid))
            workers.append(start_worker(environment, tmp_path,
                                        'restart%d' % round_))
        # The killed worker's claims expire after claim_ttl (60 s, Zaqar's
        # minimum) and its events are then handled by the others. One it
        # handled but did not delete already counts as handled, so wait
        # for the queue to empty too: only then was it handled again.
        assert wait_for(lambda: len({n for _, n in handled_lines(
            environment)}) == EVENTS and producer.connection.stats(
                't-Tick')['total'] == 0, 240 + EVENTS // 20, step=0.5)
        time.sleep(1)
    finally:
        for _, worker in workers:
            worker.send_signal(signal.SIGTERM)
        codes = [worker.wait(60) for _, worker in workers]
    assert codes == [0] * len(workers)     # SIGTERM: a graceful close
    for name, _ in workers:
        out = (tmp_path / (name + '.out')).read_text()
        assert 'zaqar-delay-worker: closing' in out
        assert 'zaqar-delay-worker: closed handled=' in out
        assert 'zaqar-delay-worker: handled=' in out    # progress lines

    lines = handled_lines(environment)
    by_event = collections.defaultdict(list)
    for pid, n in lines:
        by_event[int(n)].append(pid)
    assert sorted(by_event) == list(range(EVENTS))      # none lost
    twice = {n: pids for n, pids in by_event.items() if len(pids) > 1}
    # Handled twice is allowed only for events a killed worker held: it
    # ran them but died before deleting them. It may hold a whole batch
    # more, but only events whose handler ran can come twice, and each of
    # its PARALLELISM threads runs one event at a time.
    assert all(len(pids) == 2 and pids[0] in killed
               for pids in twice.values()), twice
    assert len(twice) <= PARALLELISM * KILLS, twice
    assert producer.connection.stats('t-Tick')['total'] == 0


def test_dead_letter_command_lists_and_redrives(environment, zaqar_url,
                                                project, monkeypatch,
                                                capsys):
    for key in ('ZD_TEST_URL', 'ZD_TEST_PROJECT', 'ZD_TEST_PREFIX'):
        monkeypatch.setenv(key, environment[key])
    app = make_app(zaqar_url, project)
    app.add_handler('Tick', lambda event: False, max_attempts=1)
    app.start()
    ids = app.enqueue_many([{'n': 1}, {'n': 2}], type='Tick',
                           context={'k': 'v'})
    try:
        assert wait_for(lambda: len(app.dead_letters('Tick')) == 2, 20)
    finally:
        app.close(5)
    spec = 'tests.worker.apps:base_app'
    assert cli.dead_letters_main([spec, 'list', 'Tick']) == 0
    listed = [json.loads(line) for line in
              capsys.readouterr().out.splitlines()]
    assert sorted((d['id'], d['data']['n'], d['context']['k'],
                   d['attempts']) for d in listed) == sorted(
        [(ids[0], 1, 'v', 1), (ids[1], 2, 'v', 1)])
    assert cli.dead_letters_main([spec, 'redrive', 'Tick', '--id',
                                  ids[0]]) == 0
    assert capsys.readouterr().out.strip() == 'redriven: 1'
    assert cli.dead_letters_main([spec, 'redrive', 'Tick']) == 0
    assert capsys.readouterr().out.strip() == 'redriven: 1'
    assert app.connection.stats('t-Tick-dead')['total'] == 0
    assert app.connection.stats('t-Tick')['total'] == 2


def test_app_spec_errors_are_clear():
    with pytest.raises(SystemExit, match='MODULE:APP'):
        cli.load_app('no_colon')
    with pytest.raises(SystemExit, match='is not a zaqar_delay.worker.App'):
        cli.load_app('tests.worker.helpers:FAST')


def test_worker_serves_prometheus_metrics_and_stops_on_sigterm(
        environment, zaqar_url, project, tmp_path):
    port = free_port()
    producer = make_app(zaqar_url, project)
    producer.enqueue_many([{'n': n} for n in range(5)], type='Tick')
    out = open(tmp_path / 'prom.out', 'wb')
    worker = subprocess.Popen(
        [sys.executable, '-m', 'zaqar_delay.worker.cli',
         'tests.worker.apps:prometheus_app', '--metrics-port', str(port)],
        cwd=ROOT, env=environment, stdout=out, stderr=subprocess.STDOUT)
    metric = 'zaqar_delay_worker_handled_total{type="Tick"} 5.0'

    def scrape():
        try:
            return requests.get('http://127.0.0.1:%d/metrics' % port,
                                timeout=5).text
        except requests.ConnectionError:
            return ''

    try:
        assert metric in wait_for(lambda: metric in scrape() and scrape(),
                                  60, step=0.2)
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(60) == 0
    plain = subprocess.run(
        [sys.executable, '-m', 'zaqar_delay.worker.cli',
         'tests.worker.apps:base_app', '--metrics-port', str(port)],
        cwd=ROOT, env=environment, capture_output=True, text=True)
    assert plain.returncode != 0
    assert 'metrics=PrometheusMetrics()' in plain.stderr


@pytest.mark.parametrize('progress_interval', ['1', '0'])
def test_sigint_closes_a_worker_gracefully(tmp_path, progress_interval):
    """docs/worker.md: SIGTERM or SIGINT closes a worker (only SIGTERM
    was tried). Its Zaqar need not answer for that."""
    (tmp_path / 'unreachable.py').write_text(
        'from zaqar_delay.worker import App\n'
        "app = App('http://127.0.0.1:9', project='p')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (ROOT, os.environ.get('PYTHONPATH')) if p))
    worker = subprocess.Popen(
        [sys.executable, '-m', 'zaqar_delay.worker.cli', 'unreachable:app',
         '--progress-interval', progress_interval], cwd=str(tmp_path),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    try:
        assert worker.stdout.readline().strip() == \
            'zaqar-delay-worker: started'
        worker.send_signal(signal.SIGINT)
        out, _ = worker.communicate(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, out
    assert 'zaqar-delay-worker: closed' in out, out
