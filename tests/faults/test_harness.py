"""The fault-history harness reports a worker that died mid-run.

README.md says the fault-history runs "report a crashed worker after the
run": ``HistoryRun.run`` returns a report whose ``violations`` hold
``worker_crashed`` for each worker process that ended with a non-zero exit
code (or a signal) before it was told to stop. Tried here with no store:
the harness spawns stand-in workers (module functions of this file, as
spawn needs) that record one call, then, as told by the spec, exit 3 or
wait to be killed, or run until the stop file; the queues are created and
drained through an empty in-memory driver.

Three deaths, each of which a real run can meet: a producer that exits 3
by itself, a producer SIGKILLed from outside (as the OOM killer would),
and a claiming consumer that exits 3 before the harness's own
``consumer_sigkill`` fault picks its slot. The last one must not pass as
the harness's own kill: the fault replaces the worker in that slot, and
only the replacement is looked at when the workers stop.
"""

import os
import signal
import time

from tests.faults import harness
from tests.faults import history
from tests.faults import workers


def _worker(spec, name, log_path):
    """Record one call, then exit with ``spec['exit'][name]`` (first
    generation only) or run until the stop file exists."""
    recorder = history.Recorder(log_path, name)
    _, _, record = recorder.call('pop', 'q', lambda: [])
    record['msgs'] = []
    recorder.write(record)
    marker = os.path.join(os.path.dirname(log_path), 'started-' + name)
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
        first = True
    except FileExistsError:
        first = False
    code = spec['exit'].get(name) if first else None
    if code is not None:
        time.sleep(0.3)  # mid-run: after the harness saw it begin
        recorder.close()
        os._exit(code)
    while not os.path.exists(spec['stop']):
        time.sleep(0.05)
    recorder.close()


def fake_produce(spec, index, log_path, seed):
    _worker(spec, 'producer-%d' % index, log_path)


def fake_consume(spec, index, mode, log_path, seed):
    _worker(spec, '%s-%d' % (mode, index), log_path)


class _Empty:
    """A data driver with no messages: what create_queues and the drain
    call, all of it answering "nothing here"."""

    def __init__(self):
        self.queue_controller = self
        self.message_controller = self
        self.claim_controller = self

    def create(self, name, *args, **kwargs):
        # queue_controller.create and claim_controller.create
        return None if 'metadata' in kwargs else (None, [])

    def gc(self):
        pass

    def stats(self, queue, project):
        return {'messages': {'total': 0}}


def _run(monkeypatch, tmp_path, exits, faults, **counts):
    monkeypatch.setattr(workers, 'produce', fake_produce)
    monkeypatch.setattr(workers, 'consume', fake_consume)
    spec = {'project': 'p', 'exit': exits,
            'queues': {kind: kind for kind in
                       ('delayed', 'grouped', 'dead', 'dlq')}}
    run = harness.HistoryRun(spec, faults(lambda: run), str(tmp_path),
                             duration=1.0, seed=1,
                             fault_interval=(1.5, 1.5), **counts)
    return run.run(_Empty())


def test_a_producer_that_exits_or_is_killed_is_reported(monkeypatch,
                                                         tmp_path):
    def faults(run):
        def kill_producer_1():
            os.kill(run()._workers[('producer', 1)].pid, signal.SIGKILL)
        return {'kill_producer_1': kill_producer_1}

    report = _run(monkeypatch, tmp_path, {'producer-0': 3}, faults,
                  producers=2, claimers=0, poppers=0)
    assert report['faults'] == {'kill_producer_1': 1}, report
    assert report['violations'] == {'worker_crashed': 2}, report
    assert sorted(report['all']['worker_crashed']) == [
        'producer-0 exit 3', 'producer-1 exit -9'], report


def test_a_claimer_that_exited_before_its_sigkill_is_reported(monkeypatch,
                                                             tmp_path):
    report = _run(monkeypatch, tmp_path, {'claim-0': 3}, lambda run: {},
                  producers=0, claimers=1, poppers=0)
    # The harness's kill of the one claimer came after it had exited.
    assert report['faults'] == {'consumer_sigkill': 1}, report
    assert report['violations'] == {'worker_crashed': 1}, report
    assert report['all']['worker_crashed'] == ['claim-0 exit 3'], report
