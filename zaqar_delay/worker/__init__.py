"""Delayed events on Zaqar: enqueue with a delay, handle per type with
bounded retries and dead letters (extra ``zaqar-delay[worker]``).

See :class:`App` and docs/worker.md.
"""

from zaqar_delay.worker.app import App
from zaqar_delay.worker.deadletters import DeadLetter
from zaqar_delay.worker.deadletters import RedriveResult
from zaqar_delay.worker.events import EventError
from zaqar_delay.worker.handlers import current_event
from zaqar_delay.worker.handlers import event_context
from zaqar_delay.worker.handlers import EventInfo
from zaqar_delay.worker.metrics import CountingMetrics
from zaqar_delay.worker.metrics import Metrics
from zaqar_delay.worker.metrics import NoopMetrics
from zaqar_delay.worker.settings import Settings

__all__ = ['App', 'CountingMetrics', 'DeadLetter', 'EventError',
           'EventInfo', 'Metrics', 'NoopMetrics', 'RedriveResult',
           'Settings', 'current_event', 'event_context']
