"""Events on the wire: type names, queue names and the message body.

Zaqar's v2 POST keeps only a message's ``ttl``, ``delay`` and ``body``, so
everything an event carries travels in the body, as an *envelope*::

    {"zd_event": 1, "type": "PaymentCheck", "data": {...},
     "context": {"key": "value"}, "due": 1767225600.0}

``due`` is the enqueuing host's clock plus the delay: handlers and the
benchmark use it to see how late an event was handled; the server's own
clock decides when the event is claimable.
"""

import dataclasses
import json
import re

ENVELOPE_VERSION = 1
# Type names are identifiers, so that "<prefix><type>-dead" can never be
# another type's queue; prefixes may also hold dashes.
# Used with fullmatch: $ alone would also match before a final newline.
TYPE_NAME = re.compile(r'[A-Za-z0-9_]+')
PREFIX = re.compile(r'[A-Za-z0-9_-]*')
MAX_QUEUE_NAME = 64
DEAD_SUFFIX = '-dead'


class EventError(ValueError):
    """An event, type, context or setting that cannot be used."""


def type_name(event_type):
    """The type name of a class (its ``event_type`` attribute or its name)
    or of a string, validated."""
    if isinstance(event_type, type):
        name = getattr(event_type, 'event_type', event_type.__name__)
    else:
        name = event_type
    if not isinstance(name, str) or not TYPE_NAME.fullmatch(name):
        raise EventError(
            'event type must be a name of ASCII letters, digits and '
            'underscores; got {!r}'.format(name))
    return name


def check_prefix(prefix):
    if not isinstance(prefix, str) or not PREFIX.fullmatch(prefix) or len(
            prefix) > MAX_QUEUE_NAME - 1 - len(DEAD_SUFFIX):
        raise EventError(
            'prefix must be at most {} ASCII letters, digits, underscores '
            'or dashes; got {!r}'.format(
                MAX_QUEUE_NAME - 1 - len(DEAD_SUFFIX), prefix))
    return prefix


def queue_name(prefix, name):
    """The queue that holds events of type ``name``."""
    queue = prefix + name
    if len(queue) + len(DEAD_SUFFIX) > MAX_QUEUE_NAME:
        raise EventError(
            'prefix + event type must be at most {} characters (Zaqar '
            'queue names are at most {}, and the dead-letter queue adds '
            '{!r}); got {!r}'.format(MAX_QUEUE_NAME - len(DEAD_SUFFIX),
                                     MAX_QUEUE_NAME, DEAD_SUFFIX, queue))
    return queue


def dead_letter_queue(queue):
    return queue + DEAD_SUFFIX


def to_data(event):
    """(type name or None, JSON-ready data) of an event object."""
    if dataclasses.is_dataclass(event) and not isinstance(event, type):
        return type_name(type(event)), dataclasses.asdict(event)
    return None, event


def envelope(name, data, context, due):
    """The message body for one event; refuses what JSON cannot carry."""
    if context is None:
        context = {}
    if not isinstance(context, dict) or not all(
            isinstance(k, str) for k in context):
        raise EventError('context must be a dict with string keys; got '
                         '{!r}'.format(context))
    body = {'zd_event': ENVELOPE_VERSION, 'type': name, 'data': data,
            'context': context, 'due': due}
    try:
        json.dumps(body, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise EventError('event of type {} is not JSON-serialisable: {}'
                         .format(name, exc)) from None
    return body


def is_envelope(body):
    return (isinstance(body, dict)
            and body.get('zd_event') == ENVELOPE_VERSION
            and isinstance(body.get('type'), str))


def decode(event_type, data):
    """The handler's argument: a dataclass instance for a dataclass type,
    else the JSON data as it was enqueued."""
    if isinstance(event_type, type) and dataclasses.is_dataclass(event_type):
        return event_type(**data)
    return data
