"""Errors raised by zaqar-delay drivers.

Every error a request can meet is one of Zaqar's storage errors, so Zaqar's
transport maps it to the right HTTP status. Bad input additionally derives
from Zaqar's ``ValidationFailed``, which the transport answers with 400 and
the message text, instead of the 503 it gives an unknown storage error. Two
are not: a store this code must not use (``UnsupportedServer``,
``LayoutMismatch``) is an operator's problem, logged with its message;
Zaqar answers the request 503.
"""

from zaqar.storage import errors as storage_errors
from zaqar.transport import validation


class InvalidInput(storage_errors.ExceptionBase, validation.ValidationFailed):
    """A message, claim or queue attribute was refused; nothing was stored."""

    def __init__(self, message):
        Exception.__init__(self, message)


class RefusedQueueAttributes(InvalidInput, storage_errors.FlavorDoesNotExist):
    """Queue metadata refused when a queue is created (``PUT``).

    Zaqar's v2 ``PUT /queues/{name}`` answers 503 to every storage error
    but FlavorDoesNotExist, which it answers with 400 and the error's text;
    deriving from it is the only way a data driver's stage can refuse a
    queue's metadata with a 400. ``PATCH`` answers ValidationFailed with 400
    (and DoesNotExist with 404), so it gets a plain InvalidInput.
    """


def invalid_field(field, value, expected):
    return InvalidInput('{} must be {}; got {!r}'.format(
        field, expected, value))


class BackendUnavailable(storage_errors.ConnectionError):
    """The store could not be reached or refused the operation; Zaqar
    answers 503 and the client may retry."""

    msg_format = '{backend} is unavailable: {reason}'


class GroupInFlight(storage_errors.Conflict):
    """A group whose head is claimed cannot be moved: it would be handed out
    twice. Retry once the head is deleted or its claim ends."""

    msg_format = ('Group {group} of queue {queue} has a claimed head; '
                  'it cannot be moved now')


class GroupMoving(storage_errors.Conflict):
    """A group is already being moved; a second move would interleave
    with it. gc finishes a move whose caller stopped."""

    msg_format = ('Group {group} of queue {queue} is being moved to '
                  '{target}; retry once that move is done')


class GcPassRunning(storage_errors.ExceptionBase):
    """Another ``zaqar-delay-gc`` pass holds the store's gc lease: this one
    did nothing (or stopped between two queues when its lease was taken)."""

    def __init__(self, message):
        Exception.__init__(self, message)


class UnsupportedServer(RuntimeError):
    """The store's server is older than this driver runs on: the message
    says which version it found and which it needs."""


class LayoutMismatch(RuntimeError):
    """The store was written by another version of zaqar-delay than this
    one reads: the message says which and what to run."""
