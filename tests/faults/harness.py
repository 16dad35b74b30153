"""Runs a fault-injection history: workers, faults, a drain, checks.

``HistoryRun(spec, faults, ...)`` creates the queues, starts producer and
consumer processes (see workers.py), and while they run calls one of
``faults`` (name -> callable; SIGKILLing a claiming consumer is added)
every ``fault_interval`` seconds, each kind once per round, recording each
as a ``fault`` line, for ``duration`` seconds and until the round then
under way is done. Then it stops the workers, drains every queue without
faults (finishing moves that killed nodes left half done), and checks the
whole history (history.check).
"""

import json
import multiprocessing
import os
import random
import signal
import time

from tests.faults import history
from tests.faults import workers

# Seconds a worker gets to finish its call once told to stop.
STOP_TIMEOUT = 60
# Seconds the workers get to begin their first calls before faults start.
WORKER_START_TIMEOUT = 120
DRAIN_CLAIM_TTL = 60
# Longer than the longest delay plus a workers' claim ttl plus a gc pass.
STUCK_AFTER = 20
# The drain stops as a runaway once it has claimed this many times the
# messages the run's posts carried (a dead letter is claimable on its
# queue, then once more on its dead-letter queue).
RUNAWAY_FACTOR = 2


class HistoryRun:

    def __init__(self, spec, faults, workdir, duration, producers=2,
                 claimers=2, poppers=1, seed=None, gc_patches=(),
                 fault_interval=(1.0, 3.0)):
        self.spec = dict(spec, stop=os.path.join(workdir, 'STOP'))
        self.faults = dict(faults)
        if claimers:
            self.faults['consumer_sigkill'] = self.kill_consumer
        self.workdir = workdir
        self.duration = duration
        self.fault_interval = fault_interval
        self.counts = {'producer': producers, 'claim': claimers,
                       'pop': poppers}
        self.seed = random.randrange(2 ** 32) if seed is None else seed
        self.rand = random.Random(self.seed)
        # (module, name, value): gc constants the drain sets so that it
        # finishes every move at once (all workers are stopped by then).
        self.gc_patches = gc_patches
        self._ctx = multiprocessing.get_context('spawn')
        self._workers = {}
        self._logs = {}
        self._generation = 0
        self._fault_log = history.Recorder(
            os.path.join(workdir, 'faults.jsonl'), 'faults')
        self.hung = []
        self.crashed = []
        self.fault_errors = []

    # -- workers -----------------------------------------------------------

    def _start(self, role, index):
        self._generation += 1
        log = os.path.join(self.workdir, '%s-%d-%d.jsonl' % (
            role, index, self._generation))
        seed = self.rand.randrange(2 ** 32)
        if role == 'producer':
            target, args = workers.produce, (self.spec, index, log, seed)
        else:
            target, args = workers.consume, (self.spec, index, role, log,
                                             seed)
        process = self._ctx.Process(target=target, args=args, daemon=True)
        process.start()
        self._workers[(role, index)] = process
        self._logs[(role, index)] = log

    def kill_consumer(self):
        """SIGKILL a claiming consumer and start a new one in its place.

        Only claimers: a pop is at-most-once by definition, so a popper
        killed between the reply and its log line loses a message that no
        store could keep."""
        slots = [slot for slot in self._workers if slot[0] == 'claim']
        slot = self.rand.choice(slots)
        process = self._workers[slot]
        # exitcode polls, so a worker that ended is reaped; its slot is
        # refilled below and _stop_workers never sees it: count it now.
        if process.exitcode is None:
            os.kill(process.pid, signal.SIGKILL)
            process.join(10)
        elif process.exitcode != 0:
            self.crashed.append('%s-%d exit %s' % (
                slot + (process.exitcode,)))
        self._start(*slot)

    # -- the run -----------------------------------------------------------

    def run(self, setup_driver):
        """Run the history; return the report (history.check + extras)."""
        self.create_queues(setup_driver)
        for role, count in self.counts.items():
            for index in range(count):
                self._start(role, index)
        self._wait_for_first_calls()
        # Faults run in this (the main) thread: servers restarted from a
        # thread that ends would get its PR_SET_PDEATHSIG (swift_server).
        self._inject(time.monotonic() + self.duration)
        self._stop_workers()
        if self.fault_errors:
            raise RuntimeError('fault injection failed: {}'.format(
                self.fault_errors))
        return self.drain_and_check(setup_driver)

    def create_queues(self, driver):
        project, queues = self.spec['project'], self.spec['queues']
        metadata = {
            'delayed': {'_default_message_delay': workers.DEFAULT_DELAY},
            'grouped': {'_default_message_delay': workers.DEFAULT_DELAY,
                        '_message_group_key': 'g'},
            'dead': {'_max_claim_count': 2,
                     '_dead_letter_queue': queues['dlq']},
            'dlq': {},
        }
        for kind, name in queues.items():
            driver.queue_controller.create(name, metadata=metadata[kind],
                                           project=project)

    def _wait_for_first_calls(self):
        """Until every worker has begun its first call: a spawned worker
        imports Zaqar first, which takes seconds on a loaded machine, and
        faults injected meanwhile would hit no call at all."""
        deadline = time.monotonic() + WORKER_START_TIMEOUT
        waiting = dict(self._logs)
        while waiting and time.monotonic() < deadline:
            for slot, log in list(waiting.items()):
                if (not self._workers[slot].is_alive()
                        or os.path.exists(log) and os.path.getsize(log)):
                    del waiting[slot]
            time.sleep(0.1)

    def _inject(self, deadline):
        # Rounds of every kind in a random order: each kind is exercised,
        # as a round begun before the deadline is finished.
        names = []
        while time.monotonic() < deadline or names:
            time.sleep(self.rand.uniform(*self.fault_interval))
            if not names:
                names = sorted(self.faults)
                self.rand.shuffle(names)
            kind = names.pop()
            outcome, _, record = self._fault_log.call(
                'fault', None, self.faults[kind], kind=kind)
            if outcome != 'ok':
                # The servers may be left down: stop injecting, report it.
                self.fault_errors.append((kind, record.get('err')))
                return
            self._fault_log.write(record)

    def _stop_workers(self):
        with open(self.spec['stop'], 'w'):
            pass
        for (role, index), process in self._workers.items():
            process.join(STOP_TIMEOUT)
            if process.is_alive():
                self.hung.append('%s-%d' % (role, index))
                os.kill(process.pid, signal.SIGKILL)
                process.join(10)
            elif process.exitcode != 0:
                self.crashed.append('%s-%d exit %s' % (
                    role, index, process.exitcode))

    # -- the end -----------------------------------------------------------

    def drain_and_check(self, driver):
        """Consume everything left, with no faults, then check."""
        records = history.load(self.workdir)
        budget = RUNAWAY_FACTOR * sum(len(r.get('msgs') or ())
                                      for r in records if r['op'] == 'post')
        saved = [(module, name, getattr(module, name))
                 for module, name, _ in self.gc_patches]
        for module, name, value in self.gc_patches:
            setattr(module, name, value)
        try:
            left = self._drain(driver, budget)
        finally:
            for module, name, value in saved:
                setattr(module, name, value)
        self._fault_log.close()
        queues = self.spec['queues']
        report = history.check(history.load(self.workdir),
                               dead_letters={queues['dead']: queues['dlq']})
        report['seed'] = self.seed
        report['duration_s'] = self.duration
        report['drain'] = self.drain_summary
        extra = {'left_in_store': {q: n for q, n in left.items() if n},
                 'worker_hung': self.hung, 'worker_crashed': self.crashed}
        for kind, found in extra.items():
            if found:
                report['violations'][kind] = len(found)
                report['examples'][kind] = report['all'][kind] = found
        return report

    def _drain_queue(self, driver, recorder, queue, budget):
        """Claim and delete from ``queue`` until a claim comes back empty
        (or ``budget`` messages were claimed): a group gives one message
        per claim, so a backlogged group needs as many claims, and a gc
        pass (every queue of the store) between each of them made the
        drain slow on a loaded machine. Returns how many were claimed."""
        total = 0
        while total < budget:
            got = workers.claim_and_delete(driver, recorder, self.spec, queue,
                                           20, DRAIN_CLAIM_TTL)
            total += got
            if not got:
                break
        return total

    def _drain(self, driver, budget):
        """Claim and delete until every queue stays empty, or nothing was
        claimable for longer than any delay or claim could hold a message;
        return what each queue still counts.

        No deadline: a drain that keeps claiming is making progress, however
        long each claim takes on a loaded machine (a long Swift run's drain
        outlasted a fixed 120 s with every message left claimable). It
        ends as a ``runaway`` only after claiming ``budget`` messages, more
        than the run's posts could have stored: then the store hands the
        same messages out again and again."""
        recorder = history.Recorder(
            os.path.join(self.workdir, 'drain.jsonl'), 'drain')
        spec, queues = self.spec, list(self.spec['queues'].values())
        started = time.monotonic()
        progress, quiet, left, claimed = started, 0, {}, 0
        gc_seconds, rounds = [], 0
        while (quiet < 2 and claimed < budget
               and time.monotonic() - progress < STUCK_AFTER):
            began = time.monotonic()
            driver.gc()
            gc_seconds.append(round(time.monotonic() - began, 2))
            rounds += 1
            got = sum(self._drain_queue(driver, recorder, q,
                                        budget - claimed)
                      for q in queues)
            claimed += got
            left = {q: driver.message_controller.stats(
                q, spec['project'])['messages']['total'] for q in queues}
            quiet = quiet + 1 if not got and not any(left.values()) else 0
            if got:
                progress = time.monotonic()
            else:
                time.sleep(0.5)
        recorder.close()
        # How the drain went, for a report whose queues it left non-empty.
        self.drain_summary = {
            'seconds': round(time.monotonic() - started, 1),
            'rounds': rounds, 'claimed': claimed, 'budget': budget,
            'gc_seconds_max': max(gc_seconds, default=0),
            'ended': 'empty' if quiet >= 2 else (
                'runaway' if claimed >= budget else 'stuck')}
        return left


def assert_clean(report, run, workdir):
    """Write ``report`` to report.json in ``workdir`` and print it (``-s``),
    then check that every fault kind of ``run`` was injected, that
    messages were consumed, and that the history shows no violation."""
    text = json.dumps(report, indent=1, sort_keys=True)
    with open(os.path.join(workdir, 'report.json'), 'w') as f:
        f.write(text)
    print(text)
    assert all(report['faults'].get(kind) for kind in run.faults), text
    assert report['messages']['consumed'] > 0, text
    assert not report['violations'], text
