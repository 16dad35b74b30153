"""Handlers and the context an event carries into its handler.

A handler is called with the event (a dataclass instance when registered
for a dataclass type, else the enqueued JSON data). Returning anything but
``False`` acknowledges the event; raising anything (``SystemExit``,
``KeyboardInterrupt`` and ``asyncio.CancelledError`` too) or returning
``False`` fails the attempt. A coroutine function works too: it runs to
completion on the handler's thread with ``asyncio.run``.

While a handler runs, :func:`event_context` returns the context map given
at enqueue time and :func:`current_event` describes the event, through
``contextvars``, like the seed's event context.
"""

import asyncio
import contextvars
import dataclasses
import inspect
import types

from zaqar_delay.worker import events
from zaqar_delay.worker import settings as zd_settings

_current = contextvars.ContextVar('zaqar_delay_worker_event', default=None)
_EMPTY = types.MappingProxyType({})


@dataclasses.dataclass(frozen=True)
class EventInfo:
    """The event a handler is running for."""

    id: str
    type: str
    queue: str
    #: enqueuing host's clock + delay (epoch seconds)
    due: float
    context: types.MappingProxyType
    #: the Zaqar claim this attempt holds
    claim_id: str = None


def current_event():
    """The :class:`EventInfo` of the running handler, or ``None``."""
    return _current.get()


def event_context():
    """The running event's context map (read-only; empty outside one)."""
    info = _current.get()
    return info.context if info is not None else _EMPTY


@dataclasses.dataclass(frozen=True)
class Handler:
    """A handler for one event type, with its parallelism and retry policy
    (``None`` takes the app's :class:`Settings`)."""

    event_type: object
    function: object
    parallelism: int = 1
    max_attempts: int = None
    retry_delay: int = None

    def __post_init__(self):
        events.type_name(self.event_type)
        if not callable(self.function):
            raise TypeError('handler for {} must be callable; got {!r}'.format(
                self.name, self.function))
        zd_settings.check_int('parallelism', self.parallelism, 1, 1000)
        if self.max_attempts is not None:
            zd_settings.check_int('max_attempts', self.max_attempts, 1, 1000)
        if self.retry_delay is not None:
            zd_settings.check_int('retry_delay', self.retry_delay, 0,
                                  14 * zd_settings.DAY)

    @property
    def name(self):
        return events.type_name(self.event_type)

    def attempts(self, settings):
        return self.max_attempts or settings.max_attempts

    def delay(self, settings):
        return (settings.retry_delay if self.retry_delay is None
                else self.retry_delay)

    def invoke(self, message_id, queue, body, claim_id=None):
        """Run the handler for one message body: True when it succeeded.
        Exceptions propagate to the caller, which logs and counts them."""
        if not events.is_envelope(body) or body['type'] != self.name:
            raise events.EventError(
                'message {} in {} is not a {} event: {!r}'.format(
                    message_id, queue, self.name, body)[:500])
        info = EventInfo(message_id, self.name, queue, body.get('due') or 0,
                         types.MappingProxyType(body.get('context') or {}),
                         claim_id)
        event = events.decode(self.event_type, body['data'])
        token = _current.set(info)
        try:
            result = self.function(event)
            # Also an object with an async __call__, or a plain decorator
            # around a coroutine function: what it returns is awaited.
            if inspect.isawaitable(result):
                result = asyncio.run(_awaited(result))
        finally:
            _current.reset(token)
        return result is not False


async def _awaited(awaitable):
    return await awaitable
