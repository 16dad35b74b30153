"""Runs one event type's handler: claims, hands out, acks, retries.

A claim of ``batch_size`` events is made whenever a handler slot is free (as a
plain claim-then-delete loop would, so the worker costs no more requests per
event); the events of a batch wait in the pool's queue for a slot, under a
claim that is renewed while any of them is pending, and close() releases those
that never started. Each event is acknowledged (deleted under its claim) as
soon as its handler succeeds. Zaqar releases claims, not messages: a failed
event is released with its claim once every other event of that claim has
finished, and is then due again after the queue's ``_redelivery_delay``; after
``_max_claim_count`` claims the server moves it to the dead-letter queue. A
crash leaves the claim to expire (``claim_ttl``), after which the events are
redelivered the same way.
"""

import collections
import concurrent.futures
import logging
import threading
import time

from zaqar_delay.worker import zaqar

LOG = logging.getLogger(__name__)
# How many failing event ids a runner remembers to tell a retry from a
# last attempt (see metrics).
FAILURE_MEMORY = 10000


class Batch:
    """The events of one claim; the claim is released when the last of
    them finishes and any was not acknowledged."""

    def __init__(self, claim, count):
        self.claim = claim
        self.pending = count
        self.unacked = 0
        self.renewed = time.monotonic()
        self.lock = threading.Lock()

    def finish(self, acked):
        """True when this was the last event and the claim must be released."""
        with self.lock:
            self.pending -= 1
            self.unacked += 0 if acked else 1
            return self.pending == 0 and self.unacked > 0


class TypeRunner:
    """One handler's claim loop and thread pool."""

    def __init__(self, connection, handler, queue, settings, metrics):
        self.connection = connection
        self.handler = handler
        self.queue = queue
        self.settings = settings
        self.metrics = metrics
        self.max_attempts = handler.attempts(settings)
        self._busy = 0
        self._batches = set()
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._deadline = None
        self._failures = collections.OrderedDict()
        self._pool = concurrent.futures.ThreadPoolExecutor(
            handler.parallelism, thread_name_prefix='zd-' + handler.name)
        self._thread = threading.Thread(
            target=self._loop, name='zd-claim-' + handler.name, daemon=True)

    @property
    def busy(self):
        return self._busy

    def start(self):
        self._thread.start()
        return self

    # -- claim loop ----------------------------------------------------

    def _loop(self):
        # Wake at least every ``tick`` to renew claims, even while an idle
        # queue waits out ``poll_interval``.
        tick = min(self.settings.poll_interval,
                   self.settings.renew_interval / 2)
        next_claim = 0
        while True:
            self._renew()
            with self._cond:
                now = time.monotonic()
                if self._stopping.is_set():
                    if self._busy == 0 or now > self._deadline:
                        return
                    self._cond.wait(tick)
                    continue
                free = self.handler.parallelism - self._busy
                if free <= 0 or now < next_claim:
                    # A finished handler or close() notifies.
                    self._cond.wait(tick if free <= 0
                                    else min(tick, next_claim - now))
                    continue
            try:
                got = self._claim(self.settings.batch_size)
            except Exception:
                LOG.exception('claim on %s failed; retrying', self.queue)
                got = False
            if not got:
                next_claim = time.monotonic() + self.settings.poll_interval

    def _claim(self, limit):
        claim, messages = self.connection.claim(
            self.queue, limit, self.settings.claim_ttl,
            self.settings.claim_grace)
        if not messages:
            return False
        batch = Batch(claim, len(messages))
        with self._cond:
            self._batches.add(batch)
            self._busy += len(messages)
        for message in messages:
            try:
                future = self._pool.submit(self._run, batch, message)
            except RuntimeError:
                # close() shut the pool while this claim was on the wire.
                self._finish(batch, False)
                continue
            future.add_done_callback(
                lambda f, b=batch: f.cancelled() and self._finish(b, False))
        return True

    def _renew(self):
        """Renew the claims of events still running."""
        now = time.monotonic()
        with self._cond:
            stale = [b for b in self._batches
                     if now - b.renewed >= self.settings.renew_interval]
        for batch in stale:
            try:
                batch.claim.update(ttl=self.settings.claim_ttl,
                                   grace=self.settings.claim_grace)
                batch.renewed = time.monotonic()
            except Exception:
                LOG.exception('renewing claim %s on %s failed',
                              batch.claim.id, self.queue)

    # -- one event -----------------------------------------------------

    def _run(self, batch, message):
        acked = False
        try:
            acked = self._attempt(batch, message)
        finally:
            # Whatever escaped (a failing metrics sink, say), the slot
            # frees and the claim stops being renewed.
            self._finish(batch, acked)

    def _attempt(self, batch, message):
        """Run the handler once; True when the event was acknowledged."""
        started = time.monotonic()
        try:
            ok = self.handler.invoke(message.id, self.queue, message.body,
                                     batch.claim.id)
        except BaseException:
            # SystemExit, KeyboardInterrupt and asyncio.CancelledError
            # raised by a handler fail its attempt like any exception: on
            # this pool thread none of them means the process is stopping
            # (signals reach the main thread), and stopping every type's
            # worker for one event would stop it again on each redelivery.
            LOG.exception('handler for %s failed on message %s',
                          self.handler.name, message.id)
            ok = False
        seconds = time.monotonic() - started
        if ok:
            acked = self._ack(message, batch)
            self.metrics.handled(self.handler.name, seconds)
            return acked
        self.metrics.failed(self.handler.name, seconds)
        self._count_failure(message.id)
        return False

    def _ack(self, message, batch):
        try:
            self.connection.delete(self.queue, message.id, batch.claim.id)
            return True
        except zaqar.GONE:
            # Our claim expired and someone else may hold the event now:
            # it will be handled again (renewal failed or stalled too long).
            LOG.warning('message %s on %s was handled after its claim '
                        'ended; it may be handled again', message.id,
                        self.queue)
        except Exception:
            LOG.exception('acknowledging message %s on %s failed',
                          message.id, self.queue)
        return False

    def _count_failure(self, message_id):
        with self._cond:
            seen = self._failures.pop(message_id, 0) + 1
            self._failures[message_id] = seen
            if len(self._failures) > FAILURE_MEMORY:
                self._failures.popitem(last=False)
        if seen >= self.max_attempts:
            self.metrics.dead_lettered(self.handler.name)
        else:
            self.metrics.retried(self.handler.name)

    def _finish(self, batch, acked):
        if batch.finish(acked):
            self._release(batch)
        with self._cond:
            self._busy -= 1
            if batch.pending == 0:
                self._batches.discard(batch)
            self._cond.notify_all()

    def _release(self, batch):
        try:
            batch.claim.delete()
        except zaqar.GONE:
            pass
        except Exception:
            # The claim then simply expires: the events come back later.
            LOG.exception('releasing claim %s on %s failed', batch.claim.id,
                          self.queue)

    # -- closing -------------------------------------------------------

    def stop(self, timeout):
        """Stop claiming, release what has not started, wait up to
        ``timeout`` seconds for running handlers. True if all finished."""
        self.begin_stop(timeout)
        return self.wait_stopped()

    def begin_stop(self, timeout):
        """Stop claiming and release what has not started, without
        waiting: what is told to stop stops even if its caller's wait
        is cut short (a second Ctrl-C during App.close). Running
        handlers get ``timeout`` seconds from now."""
        with self._cond:
            self._stop_timeout = timeout
            self._deadline = time.monotonic() + timeout
            self._stopping.set()
            self._cond.notify_all()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def wait_stopped(self):
        """Wait for running handlers until begin_stop's deadline; True if
        all finished."""
        with self._cond:
            self._cond.wait_for(lambda: self._busy == 0,
                                max(0, self._deadline - time.monotonic()))
            left = self._busy
        self._thread.join(max(0.1, self._deadline - time.monotonic() + 1))
        if left:
            LOG.warning('%d %s handlers still running after %.1f s; their '
                        'events come back when their claims expire', left,
                        self.handler.name, self._stop_timeout)
        return left == 0
