"""The multi-process tests' crew: a worker that dies fails the wait at
once, with its stderr, rather than when the wait runs out."""

import os
import sys
import time

import pytest

from tests import crew as crew_module

LONG = 600  # a wait that only ends early if the crew notices the crash


def put(results, value):
    results.put(value)


def crash(results):
    print('worker about to fail', file=sys.stderr)
    raise ValueError('boom in the worker')


def die_hard(results):
    os._exit(3)  # no traceback, no result: as a segfault or OOM kill


def put_then_fail(results):
    results.put('half')
    raise RuntimeError('failed after its result')


def linger(results):
    time.sleep(LONG)


def test_results_come_back_and_a_clean_exit_passes(crew):
    results = crew.Queue()
    crew.spawn(put, results, 7)
    crew.spawn(put, results, 8)
    assert sorted(crew.get(results, timeout=LONG) for _ in range(2)) == [7, 8]
    crew.join()


def test_a_worker_raising_fails_the_wait_at_once_with_its_stderr(crew):
    results = crew.Queue()
    crew.spawn(linger, results)
    crew.spawn(crash, results)
    with pytest.raises(crew_module.WorkerFailed) as failed:
        crew.get(results, timeout=LONG)
    message = str(failed.value)
    assert 'worker exited non-zero' in message
    assert 'exit code 1' in message
    assert 'worker about to fail' in message
    assert "ValueError: boom in the worker" in message
    assert 'linger' not in message  # only the failed worker is reported


def test_a_worker_killed_without_a_word_fails_the_wait_at_once(crew):
    results = crew.Queue()
    crew.spawn(die_hard, results)
    with pytest.raises(crew_module.WorkerFailed,
                       match='worker exited non-zero(.|\n)*exit code 3'):
        crew.get(results, timeout=LONG)


def test_a_worker_failing_after_its_result_fails_the_join(crew):
    results = crew.Queue()
    crew.spawn(put_then_fail, results)
    assert crew.get(results, timeout=LONG) == 'half'
    with pytest.raises(crew_module.WorkerFailed,
                       match='failed after its result'):
        crew.join()


def test_a_silent_crew_fails_when_the_wait_runs_out(crew):
    results = crew.Queue()
    crew.spawn(linger, results)
    with pytest.raises(crew_module.WorkerFailed,
                       match='no result from the workers within 0.5 s'):
        crew.get(results, timeout=0.5)


def test_stop_kills_the_workers_left_running(tmp_path):
    crew = crew_module.Crew(tmp_path)
    worker = crew.spawn(linger, crew.Queue())
    crew.stop()
    assert not worker.is_alive()
    assert worker.exitcode == -9
