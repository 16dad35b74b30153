"""Worker processes of the multi-process tests, watched while a test waits.

A test that only blocks on a result queue waits out the queue's whole
timeout when a worker dies before putting its result (minutes per wait;
540 s for the Swift claim race). Here every wait also watches the
workers: one that exits non-zero fails the test at once, with its stderr,
and the ``crew`` fixture kills whatever is left when the test ends.
"""

import multiprocessing
import os
import queue
import sys
import time

POLL_S = 0.2
TAIL_CHARS = 4000


class WorkerFailed(AssertionError):
    pass


def _logged(path, target, args):
    """Runs in the worker: its stderr (tracebacks included) into ``path``."""
    sys.stderr.flush()
    with open(path, 'w') as log:
        os.dup2(log.fileno(), 2)
    target(*args)


def next_result(results, timeout, check, report):
    """The next item of ``results``, calling ``check`` (which raises when
    a worker failed) while it waits; fails after ``timeout`` seconds
    without an item, with ``report()``."""
    deadline = time.monotonic() + timeout
    while True:
        check()
        try:
            return results.get(timeout=POLL_S)
        except queue.Empty:
            if time.monotonic() >= deadline:
                raise WorkerFailed('no result from the workers within '
                                   '{} s\n{}'.format(timeout, report()))


class Crew:
    """Spawned workers (``spawn``: nothing inherited from pytest's
    process) whose stderr goes to a file each in ``log_dir``."""

    def __init__(self, log_dir):
        self.ctx = multiprocessing.get_context('spawn')
        self._log_dir = str(log_dir)
        self._workers = []  # (process, stderr path)

    def Queue(self):
        return self.ctx.Queue()

    def Event(self):
        return self.ctx.Event()

    def spawn(self, target, *args):
        path = os.path.join(self._log_dir, '{}-{}.stderr'.format(
            target.__name__, len(self._workers)))
        process = self.ctx.Process(target=_logged, args=(path, target, args))
        process.start()
        self._workers.append((process, path))
        return process

    def get(self, results, timeout):
        """The next item of ``results``; fails as soon as a worker has
        exited non-zero, or after ``timeout`` seconds without an item."""
        return next_result(results, timeout, self.check,
                           lambda: self._report(self._workers))

    def check(self):
        failed = [(p, path) for p, path in self._workers
                  if p.exitcode not in (None, 0)]
        if failed:
            raise WorkerFailed('worker exited non-zero\n'
                               + self._report(failed))

    def join(self, timeout=60):
        """Wait for every worker to end, each with exit code 0."""
        deadline = time.monotonic() + timeout
        for process, _ in self._workers:
            process.join(max(0, deadline - time.monotonic()))
        self.check()
        alive = [(p, path) for p, path in self._workers if p.is_alive()]
        if alive:
            raise WorkerFailed('workers still running after {} s\n{}'.format(
                timeout, self._report(alive)))

    def stop(self):
        """Kill the workers still running (the test failed or returned
        early): a non-daemon worker left behind would hold up the run."""
        for process, _ in self._workers:
            if process.is_alive():
                process.kill()
            process.join()

    def _report(self, workers):
        parts = []
        for process, path in workers:
            try:
                with open(path, errors='replace') as log:
                    text = log.read()[-TAIL_CHARS:]
            except OSError:
                text = '(no stderr file)'
            parts.append('--- {} pid {} exit code {}; stderr:\n{}'.format(
                process.name, process.pid, process.exitcode, text))
        return '\n'.join(parts)
