"""Runs the roles of a multi-process test (workers.py) at once.

Each role runs as ``role(driver, *args)``. On a real store each is a
spawned process (crew.py: one that exits non-zero fails the test at once,
with its stderr) building its own data driver from the test driver's
store options. On mongomock, whose fake server lives in the test's own
process, they are threads sharing the test's driver, switching often so
that their store calls interleave. Every worker builds its driver, says
it is ready and waits for :meth:`Team.start`: the roles start together
however long the interpreters take to boot.
"""

import importlib
import queue
import threading
import time
import traceback

from localstack import backends
from tests import crew as crew_module

# Thread switches this often (s) on mongomock, so store calls interleave.
SWITCH_INTERVAL_S = 1e-6


def store_group(backend):
    return 'drivers:message_store:delay.' + backend


def make_driver(spec):
    """A data driver of ``spec`` = (backend, store options, redis url)."""
    backend, options, redis_url = spec
    conf = backends.make_conf(**{store_group(backend): options})
    module = importlib.import_module(
        'zaqar_delay.drivers.{}.driver'.format(backend))
    return module.DataDriver(conf, None,
                             backends.control_driver(conf, redis_url))


def _in_process(spec, ready, go, role, args):
    driver = make_driver(spec)
    ready.put(role.__name__)
    go.wait()
    try:
        role(driver, *args)
    finally:
        driver.close()


class Team:
    """Processes (``spec`` given) or threads sharing ``driver``."""

    def __init__(self, crew, driver, spec):
        self._crew = crew
        self._driver = driver
        self._spec = spec
        self._threads = []
        self._failures = []
        self._spawned = 0
        self._ready = self.Queue()
        self._go = self.Event()

    @property
    def threaded(self):
        return self._spec is None

    def Queue(self):
        return queue.Queue() if self.threaded else self._crew.Queue()

    def Event(self):
        return threading.Event() if self.threaded else self._crew.Event()

    def spawn(self, role, *args):
        self._spawned += 1
        if not self.threaded:
            self._crew.spawn(_in_process, self._spec, self._ready, self._go,
                             role, args)
            return
        thread = threading.Thread(target=self._in_thread, args=(role, args),
                                  name=role.__name__, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _in_thread(self, role, args):
        self._ready.put(role.__name__)
        self._go.wait()
        try:
            role(self._driver, *args)
        except BaseException:
            self._failures.append('--- thread {}:\n{}'.format(
                role.__name__, traceback.format_exc()))

    def start(self, timeout=120):
        """Release every worker spawned so far at once, when all are
        ready."""
        if self.threaded:
            # Build the shared driver's lazy controllers before the
            # threads race to (they are not guarded).
            self._driver.message_controller
            self._driver.claim_controller
        for _ in range(self._spawned):
            self.get(self._ready, timeout)
        self._go.set()

    def get(self, results, timeout):
        """The next item of ``results``; fails as soon as a worker failed,
        or after ``timeout`` seconds without an item."""
        if not self.threaded:
            return self._crew.get(results, timeout)
        return crew_module.next_result(
            results, timeout, self.check,
            lambda: [t.name for t in self._threads if t.is_alive()])

    def check(self):
        if self._failures:
            raise crew_module.WorkerFailed('worker failed\n'
                                           + '\n'.join(self._failures))

    def join(self, timeout=60):
        """Wait for every worker to end, each without failing."""
        if not self.threaded:
            return self._crew.join(timeout)
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0, deadline - time.monotonic()))
        self.check()
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            raise crew_module.WorkerFailed(
                'workers still running after {} s: {}'.format(timeout, alive))

