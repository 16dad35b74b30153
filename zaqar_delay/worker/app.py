"""The application object: enqueue events, register handlers, run, close.

::

    app = App('http://zaqar:8888', project='shop', prefix='shop-')

    @dataclasses.dataclass
    class PaymentCheck:
        order: int

    def check(event):
        print(event.order, event_context()['trace'])

    app.add_handler(PaymentCheck, check, parallelism=4)
    app.enqueue(PaymentCheck(order=7), delay=600, context={'trace': 'ab1'})
    app.run()          # until close() or, under zaqar-delay-worker, SIGTERM

Each event type has its own queue ``<prefix><type>`` and dead-letter queue
``<prefix><type>-dead``. The type queue gets ``_default_message_delay: 1``
(our drivers honour a message's ``delay`` only on a delayed queue; every
event says its own delay), and, from the app that handles it,
``_max_claim_count``, ``_redelivery_delay`` and the dead-letter keys.
"""

import asyncio
import functools
import logging
import threading
import time

from zaqar_delay.worker import deadletters
from zaqar_delay.worker import events
from zaqar_delay.worker import handlers
from zaqar_delay.worker import metrics as zd_metrics
from zaqar_delay.worker import runner
from zaqar_delay.worker import settings as zd_settings
from zaqar_delay.worker import zaqar

LOG = logging.getLogger(__name__)


class App:
    """Delayed events on one Zaqar project.

    :param url: Zaqar's endpoint.
    :param project: project id for a noauth Zaqar; or give ``conf``, the
        python-zaqarclient configuration (for example Keystone auth_opts).
    :param prefix: put before every type name to make its queue name (the
        seed's ``dataSetPrefix``).
    :param settings: :class:`Settings`.
    :param metrics: a :class:`Metrics`; counts are also kept in
        :attr:`counts` for the progress line.
    """

    def __init__(self, url, project=None, conf=None, prefix='',
                 settings=None, metrics=None):
        self.prefix = events.check_prefix(prefix)
        self.settings = settings or zd_settings.Settings()
        self.connection = zaqar.Connection(url, conf=conf, project=project)
        self.counts = zd_metrics.CountingMetrics()
        self.metrics = zd_metrics.Tee(self.counts,
                                      metrics or zd_metrics.Metrics())
        self._handlers = {}
        self._runners = {}
        self._ready_queues = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._running = False
        self._stats_thread = None

    # -- enqueue -------------------------------------------------------

    def queue_for(self, event_type):
        return events.queue_name(self.prefix, events.type_name(event_type))

    def enqueue(self, event, delay=0, context=None, type=None):
        """Enqueue ``event`` to be handled ``delay`` seconds from now and
        return its message id. ``event`` is a dataclass instance (its class
        names the type) or JSON data with ``type`` naming it; ``context``
        is a dict of JSON values the handler sees as
        :func:`event_context`. Zaqar bounds ``delay`` by its
        ``max_message_delay`` (900 s by default). The event's message
        lives ``delay`` + ``event_ttl`` seconds, at most 14 days (Zaqar's
        default ``max_message_ttl``)."""
        [message_id] = self.enqueue_many([event], delay, context, type)
        return message_id

    def enqueue_many(self, events_, delay=0, context=None, type=None):
        """:meth:`enqueue` for several events of one type, posted 20 to a
        request (Zaqar's default page); returns their message ids. Nothing
        is posted if any event cannot be encoded."""
        # A delay that leaves an event no minute to live after it is due
        # once its ttl is cut to MAX_MESSAGE_TTL is refused.
        zd_settings.check_int('delay', delay, 0, zd_settings.MAX_MESSAGE_TTL
                              - zd_settings.MIN_MESSAGE_TTL)
        # Zaqar refuses a ttl above its max_message_ttl: an event whose
        # delay plus event_ttl exceeds it lives that much less after due.
        ttl = min(delay + self.settings.event_ttl,
                  zd_settings.MAX_MESSAGE_TTL)
        names, messages = set(), []
        due = time.time() + delay
        for event in events_:
            name, data = events.to_data(event)
            name = events.type_name(type) if type is not None else name
            if name is None:
                raise events.EventError('enqueue needs type= for a {} event'
                                        .format(event.__class__.__name__))
            names.add(name)
            messages.append({'ttl': ttl, 'delay': delay,
                             'body': events.envelope(name, data, context,
                                                     due)})
        if len(names) > 1:
            raise events.EventError('enqueue_many takes events of one type; '
                                    'got {}'.format(sorted(names)))
        if not messages:
            return []
        [name] = names
        queue = events.queue_name(self.prefix, name)
        self._ensure_event_queue(queue)
        ids = []
        for start in range(0, len(messages), zaqar.PAGE):
            page = messages[start:start + zaqar.PAGE]
            ids.extend(self.connection.post(queue, page))
            self.metrics.enqueued(name, len(page))
        return ids

    async def enqueue_async(self, event, delay=0, context=None, type=None):
        """:meth:`enqueue` for asyncio code. python-zaqarclient is blocking,
        so the call runs on the loop's default executor."""
        return await asyncio.get_running_loop().run_in_executor(
            None, functools.partial(self.enqueue, event, delay, context,
                                    type))

    async def enqueue_many_async(self, events_, delay=0, context=None,
                                 type=None):
        """:meth:`enqueue_many` for asyncio code, as :meth:`enqueue_async`."""
        return await asyncio.get_running_loop().run_in_executor(
            None, functools.partial(self.enqueue_many, list(events_), delay,
                                    context, type))

    def _ensure_event_queue(self, queue, retry_policy=None):
        metadata = {'_default_message_delay': 1}
        metadata.update(retry_policy or {})
        key = (queue, tuple(sorted(metadata.items())))
        if key not in self._ready_queues:
            self.connection.ensure_queue(queue, metadata)
            self._ready_queues.add(key)

    # -- handlers ------------------------------------------------------

    def add_handler(self, event_type, function, parallelism=1,
                    max_attempts=None, retry_delay=None):
        """Handle ``event_type`` (a dataclass or a type name) with
        ``function`` on up to ``parallelism`` threads; ``max_attempts`` and
        ``retry_delay`` override the settings for this type. Replaces an
        earlier handler of the type; starts at once if the app runs. If
        it cannot start (its queues cannot be set up), the error is
        raised and the type has no handler: a handler the app kept but
        did not run would look handled and take nothing."""
        handler = handlers.Handler(event_type, function, parallelism,
                                   max_attempts, retry_delay)
        self.remove_handler(handler.name)
        replaced = None
        try:
            with self._lock:
                self._handlers[handler.name] = handler
                # Another add_handler of this type may have started its
                # runner since our remove_handler: the last one in wins.
                replaced = self._runners.pop(handler.name, None)
                if self._running:
                    try:
                        self._runners[handler.name] = self._start_runner(
                            handler)
                    except BaseException:
                        del self._handlers[handler.name]
                        raise
        finally:
            if replaced is not None:
                replaced.stop(self._timeout(None))
        return handler

    def remove_handler(self, event_type, timeout=None):
        """Stop handling ``event_type``, as :meth:`close` does for all."""
        name = events.type_name(event_type)
        with self._lock:
            self._handlers.pop(name, None)
            running = self._runners.pop(name, None)
        if running is not None:
            return running.stop(self._timeout(timeout))
        return True

    def _retry_policy(self, handler):
        queue = self.queue_for(handler.name)
        return {
            '_max_claim_count': handler.attempts(self.settings),
            '_redelivery_delay': handler.delay(self.settings),
            '_dead_letter_queue': events.dead_letter_queue(queue),
            '_dead_letter_queue_messages_ttl': self.settings.dead_letter_ttl,
        }

    def _start_runner(self, handler):
        queue = self.queue_for(handler.name)
        self.connection.ensure_queue(events.dead_letter_queue(queue), {})
        self._ensure_event_queue(queue, self._retry_policy(handler))
        return runner.TypeRunner(self.connection, handler, queue,
                                 self.settings, self.metrics).start()

    # -- running -------------------------------------------------------

    def start(self):
        """Start every handler's claim loop and return at once. If one
        cannot start (its queues cannot be set up), :meth:`close` stops
        those already started and the error is raised: the app is not
        running, and a later start() starts every handler again."""
        try:
            with self._lock:
                if self._running:
                    return self
                self._closed.clear()
                self._running = True
                for handler in self._handlers.values():
                    self._runners[handler.name] = self._start_runner(
                        handler)
        except BaseException:
            self.close()
            raise
        self._stats_thread = threading.Thread(
            target=self._stats_loop, name='zd-stats', daemon=True)
        self._stats_thread.start()
        return self

    def run(self):
        """:meth:`start`, then block until :meth:`close` finishes. Ctrl-C
        (``KeyboardInterrupt``) or any other exception raised meanwhile
        closes the app, then propagates."""
        try:
            self.start()
            self._closed.wait()
        except BaseException:
            self.close()
            raise

    def close(self, timeout=None):
        """Stop claiming, release claimed events that have not started and
        wait up to ``timeout`` (``close_timeout``) seconds for running
        handlers. True when every handler finished in time."""
        with self._lock:
            self._running = False
            running, self._runners = self._runners, {}
        timeout = self._timeout(timeout)
        # Every type stops claiming before the wait for any: a second
        # Ctrl-C that cuts the wait short leaves none claiming.
        for typed in running.values():
            typed.begin_stop(timeout)
        finished = [typed.wait_stopped() for typed in running.values()]
        self._closed.set()
        return all(finished)

    def _timeout(self, timeout):
        return self.settings.close_timeout if timeout is None else timeout

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- stats, progress -----------------------------------------------

    def _stats_loop(self):
        while not self._closed.wait(self.settings.stats_interval):
            try:
                self.refresh_stats()
            except Exception:
                LOG.exception('reading queue stats failed')

    def refresh_stats(self):
        """Read every handled type's queue stats into the depth gauges."""
        with self._lock:
            names = list(self._handlers)
        for name in names:
            queue = self.queue_for(name)
            stats = self.connection.stats(queue)
            dead = self.connection.stats(events.dead_letter_queue(queue))
            self.metrics.queue_depth(
                name, stats.get('free', 0), stats.get('delayed', 0),
                stats.get('claimed', 0), dead.get('total', 0))

    def progress(self):
        """One line: counters of this process and the latest queue depth."""
        counts = self.counts
        depth = {}
        for values in list(counts.depth.values()):
            for key, value in values.items():
                depth[key] = depth.get(key, 0) + value
        with self._lock:
            busy = sum(r.busy for r in self._runners.values())
        return ('handled={} failed={} retried={} dead_lettered={} '
                'running={} ready={} delayed={} in_flight={} dead={}'.format(
                    counts.total('handled'), counts.total('failed'),
                    counts.total('retried'), counts.total('dead_lettered'),
                    busy, depth.get('ready', '?'), depth.get('delayed', '?'),
                    depth.get('in_flight', '?'), depth.get('dead', '?')))

    # -- dead letters --------------------------------------------------

    def dead_letters(self, event_type, limit=None):
        """The events in ``event_type``'s dead-letter queue."""
        return deadletters.list_dead(self, events.type_name(event_type),
                                     limit)

    def redrive(self, event_type, ids=None):
        """Move dead-lettered events (all, or those ``ids``) back to their
        queue with body and context; returns how many moved."""
        return len(self.redrive_report(event_type, ids).moved)

    def redrive_report(self, event_type, ids=None):
        """:meth:`redrive`, returning a :class:`RedriveResult`: the ids
        moved and, of ``ids``, those held under another claim (a redrive
        or reader in progress), which were not posted."""
        return deadletters.redrive(self, events.type_name(event_type), ids)
