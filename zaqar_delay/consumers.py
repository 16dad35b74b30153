"""Persistent consumers: stored cursors over a queue (SPEC §5).

Through Zaqar's unchanged REST API a persistent consumer is a subscription
on the queue whose subscriber is ``cursor:<consume_id>``; the consume_id is
the ``Client-ID`` the consumer sends when it lists messages, and its cursor
is the list ``marker``:

* listing with its Client-ID and a marker acknowledges every message up to
  and including that position and stores it as the cursor; the marker must
  be a position (decimal digits) neither behind the stored cursor nor
  beyond the last position ever handed to this consumer
  (:class:`CursorMismatch`, a 400 that names the marker and the stored
  cursor);
* listing without a marker resumes right after the stored cursor (from the
  start when nothing was acknowledged yet), after a disconnect or any
  restart;
* a consumer's page holds every kept message in position order, claimed
  ones too, and stops before the first message that is not due yet, so a
  delayed message is never skipped;
* positions after the cursor, never handed to the consumer, that hold no
  message any more when its next page begins (removed by retention or TTL,
  or deleted by another client) are added to its ``lost`` count once;
  a position its writer took and stored no message at (a backend that
  takes positions before it stores: ``_given_up``) never held one, and
  is not.

Read-by-all cleanup (``consumers_required``) uses the cursors of the live
consumers (those active within ``consumer_idle_time``): see
:func:`read_through`.
"""

import dataclasses
import re
import uuid

from zaqar_delay import errors

SCHEME = 'cursor'
PREFIX = SCHEME + ':'
# What a marker handed to a consumer looks like: a position.
_POSITION = re.compile('[0-9]+')


def consume_id_of(subscriber):
    """The consume_id of a ``cursor:<consume_id>`` subscriber, None for a
    subscriber of another scheme. The consume_id must be a Client-ID as
    Zaqar accepts it (a UUID), in its canonical form."""
    if not isinstance(subscriber, str) or not subscriber.startswith(PREFIX):
        return None
    consume_id = subscriber[len(PREFIX):]
    try:
        canonical = str(uuid.UUID(consume_id))
    except ValueError:
        canonical = None
    if canonical != consume_id:
        raise errors.invalid_field(
            'subscriber', subscriber,
            'cursor:<consume_id>, the consume_id being the Client-ID (a '
            'UUID, lower case with dashes) the consumer lists with')
    return consume_id


@dataclasses.dataclass(frozen=True)
class Consumer:
    """A persistent consumer's stored state."""

    consume_id: str
    # Last acknowledged position; None before the first acknowledgement.
    cursor: int = None
    # Last position ever handed to it; None before its first page.
    handed: int = None
    lost: int = 0
    last_active_ms: int = 0

    def is_idle(self, now_ms, idle_s):
        return self.last_active_ms <= now_ms - idle_s * 1000

    def position_of(self, marker):
        """The position ``marker`` names (None: no marker, resume after
        the cursor). A marker is one this consumer was handed: decimal
        digits; anything else (``abc``, ``-1``, ``3x``) is refused with
        :class:`CursorMismatch`, naming the marker and the cursor."""
        if marker is None or marker == '':
            return None
        if not (isinstance(marker, str) and _POSITION.fullmatch(marker)):
            raise CursorMismatch(
                'marker {!r} is not a position: persistent consumer {} '
                'lists with the marker of the last page it was handed (its '
                'cursor is {}, the last position handed to it {}), or '
                'without one to resume after the cursor'.format(
                    marker, self.consume_id, _shown(self.cursor),
                    _shown(self.handed)))
        return int(marker)

    def check_ack(self, position):
        """Refuse a marker behind the cursor or past what was handed out;
        nothing is stored then."""
        behind = self.cursor is not None and position < self.cursor
        ahead = self.handed is None or position > self.handed
        if behind or ahead:
            raise CursorMismatch(
                'marker {} does not match the stored state of persistent '
                'consumer {}: its cursor is {} and the last position handed '
                'to it is {}; list with a marker from {} to {}, or without '
                'one to resume after the cursor'.format(
                    position, self.consume_id,
                    _shown(self.cursor), _shown(self.handed),
                    _shown(self.cursor), _shown(self.handed)))

    def gap(self, start, first):
        """The positions this consumer skips when its page from ``start``
        begins at ``first``, as (after, before), both excluded, or None:
        those after both ``start`` and the last one handed to it, so a
        page handed again counts nothing twice and a message it was
        handed once is not lost. A consumer that was handed nothing and
        acknowledged nothing starts at the oldest kept message: what went
        before its first page is not lost to it."""
        seen = [p for p in (start, self.handed) if p is not None]
        if not seen or first - max(seen) <= 1:
            return None
        return max(seen), first

    def skipped(self, start, first):
        """How many positions :meth:`gap` holds."""
        gap = self.gap(start, first)
        return 0 if gap is None else gap[1] - gap[0] - 1

    def report(self, now_ms, idle_s, lag):
        """What ``GET .../subscriptions/<id>`` shows in ``options``."""
        return {'cursor': None if self.cursor is None else str(self.cursor),
                'lag': lag, 'lost': self.lost,
                'last_active_age': max(0, (now_ms - self.last_active_ms)
                                       // 1000),
                'idle': self.is_idle(now_ms, idle_s)}


def _shown(position):
    return 'none' if position is None else position


class CursorMismatch(errors.InvalidInput):
    """A persistent consumer listed with a marker its stored state does not
    allow; the cursor is never reset silently."""


def read_through(required, consumers, now_ms, idle_s):
    """The last position every required reader has acknowledged, or None
    when read-by-all removes nothing, given the queue's ``required``
    (``consumers_required``) and its ``consumers``: see
    :func:`read_through_of`."""
    live = [c for c in consumers if not c.is_idle(now_ms, idle_s)]
    return read_through_of(required, len(live), lowest_cursor(live))


def lowest_cursor(live):
    """The lowest cursor of ``live`` consumers, -1 while one of them has
    acknowledged nothing, None when there is none."""
    return min((-1 if c.cursor is None else c.cursor for c in live),
               default=None)


def read_through_of(required, live, lowest):
    """read_through from the number of ``live`` (not idle) consumers P and
    their ``lowest`` cursor (as :func:`lowest_cursor`).

    required None, or P < required: None; P >= required > 0, or required
    0 with P > 0: the lowest live cursor (-1 while one of them has
    acknowledged nothing); required 0 with no live consumer: every
    message counts as read (``READ_ALL``).
    """
    if required is None:
        return None
    if not live:
        return READ_ALL if required == 0 else None
    if live < required:
        return None
    return lowest


# read_through when every message counts as read.
READ_ALL = 2 ** 62


class NotificationTask:
    """The ``cursor`` entry of ``zaqar.notification.tasks``: Zaqar notifies
    every subscriber of a queue on each post, and a persistent consumer
    reads by listing, so there is nothing to send."""

    def execute(self, subscription, messages, **kwargs):
        pass

    def register(self, subscriber, options, ttl, project_id, request_data):
        pass
