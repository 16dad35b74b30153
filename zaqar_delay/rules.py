"""Rules shared by every backend: validation, effective delay, group ids.

Nothing here touches a store. Backends receive already-validated values
(:class:`QueuePolicy`, :class:`NewMessage`) and only stamp times with their
own clock.
"""

import dataclasses
import json
import os
import re
import sys
import typing

import bson

from zaqar.storage import utils as storage_utils
from zaqar.transport import validation

from zaqar_delay import errors

# Queue metadata keys that zaqar-delay reads, besides Zaqar's own.
DEFAULT_DELAY = '_default_message_delay'
GROUP_KEY = '_message_group_key'
MAX_CLAIM_COUNT = '_max_claim_count'
DEAD_LETTER_QUEUE = '_dead_letter_queue'
DEAD_LETTER_TTL = '_dead_letter_queue_messages_ttl'
REDELIVERY_DELAY = '_redelivery_delay'
# Seconds a client keeps its groups after its last claim, renewal or delete
# (sticky.py).
STICKY = '_message_group_sticky'
MAX_STICKY = 7 * 24 * 3600
# What a delay stored before the operator lowered max_message_delay may
# be, for a pop, which never applies it (controller.lenient_policy).
ANY_DELAY = 2 ** 31
# Zaqar's own: its transport encrypts bodies before a driver sees them.
ENCRYPTED = '_enable_encrypt_messages'

# A JSON body key is data; this bound only keeps a typo from naming a
# 10 MB "key". Zaqar's queue metadata is itself capped at 64 KiB.
MAX_GROUP_KEY_LENGTH = 256
# Longest group id, counted on its JSON encoding.
MAX_GROUP_ID_LENGTH = 256
# Zaqar's own rule, so every queue we name can be addressed over its API.
MAX_QUEUE_NAME_LENGTH = validation.QUEUE_NAME_MAX_LEN
QUEUE_NAME_REGEX = validation.QUEUE_NAME_REGEX

_CLAIM_ID = re.compile(
    '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}')

# Bodies are stored as compact JSON text. One encoder for every message:
# json.dumps with any non-default argument builds a new one per call,
# which took half of the encoding's time.
_body_json = json.JSONEncoder(ensure_ascii=False, allow_nan=False,
                              separators=(',', ':')).encode


def is_strict_int(value):
    """True for ints; False for bools, floats, strings and None."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_int(field, value, low, high, unit=' seconds'):
    """Return ``value`` if it is an int in [low, high], else raise.

    The error names the field, the value and the bound (in ``unit``), and
    is raised before anything is stored.
    """
    if not is_strict_int(value) or not low <= value <= high:
        raise errors.InvalidInput(
            '{} must be an integer from {} to {}{}; got {!r}'.format(
                field, low, high, unit, value))
    return value


@dataclasses.dataclass(frozen=True)
class QueuePolicy:
    """What a queue's metadata asks of its messages and claims."""

    default_delay: int = 0
    group_key: str = None
    max_claim_count: int = 0
    dead_letter_queue: str = None
    dead_letter_ttl: int = None
    redelivery_delay: int = 0
    # Sticky seconds (0: groups are not sticky).
    sticky: int = 0
    # The client a claim or pop is made for on a sticky queue (set per call
    # by the controllers, from sticky.client_for).
    client: str = None
    # zaqar_delay.retention.Retention; None until a controller fills it in.
    retention: object = None

    @property
    def is_delayed(self):
        return self.default_delay > 0

    @classmethod
    def from_metadata(cls, metadata, max_delay, queue=None):
        """Parse and strictly validate the metadata of queue ``queue``.

        Unset or ``None`` values mean "feature off". Zaqar's own transport
        validates some of these keys loosely (it lets ``True`` through as a
        delay); this is the check every backend relies on, when metadata is
        set (stages.py) and again when it is used.
        """
        metadata = metadata or {}

        def get(key):
            return metadata.get(key)

        default_delay = get(DEFAULT_DELAY)
        if default_delay is not None:
            check_int(DEFAULT_DELAY, default_delay, 0, max_delay)
        redelivery = get(REDELIVERY_DELAY)
        if redelivery is not None:
            check_int(REDELIVERY_DELAY, redelivery, 0, max_delay)
        max_claims = get(MAX_CLAIM_COUNT)
        if max_claims is not None:
            check_int(MAX_CLAIM_COUNT, max_claims, 1, 2 ** 31, unit='')
        dlq = get(DEAD_LETTER_QUEUE)
        if dlq is not None:
            check_queue_name(DEAD_LETTER_QUEUE, dlq)
            if dlq == queue:
                # Dead letters would be copied onto themselves: on every
                # backend that loses or recycles them.
                raise errors.invalid_field(
                    DEAD_LETTER_QUEUE, dlq,
                    'the name of another queue than {!r}'.format(queue))
        dlq_ttl = get(DEAD_LETTER_TTL)
        if dlq_ttl is not None:
            check_int(DEAD_LETTER_TTL, dlq_ttl, 1, 2 ** 31)
        group_key = get(GROUP_KEY)
        if group_key is not None and not _is_group_key(group_key):
            raise errors.invalid_field(
                GROUP_KEY, group_key,
                'a body key of 1 to {} characters'.format(
                    MAX_GROUP_KEY_LENGTH))
        if group_key is not None and get(ENCRYPTED) is True:
            # The group id would be read from a body the driver only ever
            # sees encrypted; refusing beats silently losing group order.
            raise errors.InvalidInput(
                '{} cannot be used on a queue with {}: message groups '
                'read the body, which Zaqar encrypts before storing '
                'it'.format(GROUP_KEY, ENCRYPTED))
        sticky = get(STICKY)
        if sticky is not None:
            check_int(STICKY, sticky, 1, MAX_STICKY)
            if group_key is None:
                raise errors.InvalidInput(
                    '{} needs {}: only message groups can be '
                    'sticky'.format(STICKY, GROUP_KEY))
        return cls(default_delay=default_delay or 0,
                   group_key=group_key or None,
                   max_claim_count=max_claims or 0,
                   dead_letter_queue=dlq,
                   dead_letter_ttl=dlq_ttl,
                   redelivery_delay=redelivery or 0,
                   sticky=sticky or 0)

    @classmethod
    def for_arrivals(cls, metadata):
        """What a queue's metadata means for messages moved into it (dead
        letters, moved groups): only how they are grouped.

        These messages were accepted already, so metadata that is not valid
        (stored before it was checked, or by another tool) leaves them
        ungrouped rather than stranded or lost.
        """
        group_key = (metadata or {}).get(GROUP_KEY)
        return cls(group_key=group_key if _is_group_key(group_key)
                   else None)


def _is_group_key(value):
    return isinstance(value, str) and 0 < len(value) <= MAX_GROUP_KEY_LENGTH


def check_queue_name(field, value):
    """Refuse a queue name outside Zaqar's documented characters (1 to
    MAX_QUEUE_NAME_LENGTH ASCII letters, digits, ``_``, ``-``, ``.``)."""
    if (not isinstance(value, str) or len(value) > MAX_QUEUE_NAME_LENGTH
            # fullmatch: the regex's $ also matches before a final newline.
            or not QUEUE_NAME_REGEX.fullmatch(value)):
        raise errors.invalid_field(
            field, value,
            'a queue name of 1 to {} ASCII letters, digits, underscores, '
            'dashes and dots'.format(MAX_QUEUE_NAME_LENGTH))
    return value


class NewMessage(typing.NamedTuple):
    """A validated message, ready for a backend to stamp and store.

    A named tuple rather than a frozen dataclass: as immutable, and built
    in a tenth of the time (a frozen dataclass sets each field through
    ``object.__setattr__``), which counts on every message posted."""

    id: str
    ttl: int
    delay: int
    body: object
    body_json: str
    group: str = None
    checksum: str = None
    # How long ago the message was created (ms): 0 for a post; a message
    # carried over from another store (zaqar-delay-migrate) keeps its age.
    # A backend stamps created = now - age_ms and counts ttl (expires) and
    # delay (d) from created.
    age_ms: int = 0
    # Its queue pins groups to clients (``_message_group_sticky``): a new
    # head of its group may have to take over the group's pin.
    sticky: bool = False


def effective_delay(message, policy, max_delay):
    """The delay (seconds) that applies to ``message`` on this queue.

    A message's own ``delay`` overrides the queue default; on a normal queue
    (no default delay) it has no effect. It is validated either way, so bad
    input is refused the same on every queue.
    """
    given = 'delay' in message
    if given:
        check_int('delay', message['delay'], 0, max_delay)
    if not policy.is_delayed:
        return 0
    return message['delay'] if given else policy.default_delay


def _storable_text(text):
    """``text`` if it can be stored as UTF-8. JSON's ``\ud800`` escape
    decodes to a lone surrogate, which no store takes (ValueError)."""
    if not text.isascii():
        try:
            text.encode('utf-8')
        except UnicodeEncodeError as exc:
            raise ValueError('{} (a lone surrogate) at {}'.format(
                repr(text[exc.start:exc.end]), exc.start)) from None
    return text


def encode_group_id(value):
    """The stored form of a group id: JSON text, so ``"1"`` and ``1`` stay
    distinct. Refuses anything but a string or an integer, and long ids."""
    if not (isinstance(value, str) or is_strict_int(value)):
        raise errors.invalid_field('group id', value,
                                   'a string or an integer')
    try:
        encoded = _storable_text(json.dumps(value, ensure_ascii=False))
    except ValueError as exc:
        raise errors.InvalidInput('group id is not storable text: {}'.format(
            exc))
    if len(encoded) > MAX_GROUP_ID_LENGTH:
        raise errors.InvalidInput(
            'group id may be at most {} characters; got {}'.format(
                MAX_GROUP_ID_LENGTH, len(encoded)))
    return encoded


def group_of(body, policy):
    """The group id of a message body, or None for an ungrouped message.

    Group ids are strings or integers taken from the body key that the queue
    names. They are returned JSON-encoded (``'"a"'`` and ``'1'`` stay
    distinct) and are never used as syntax by any backend.
    """
    if policy.group_key is None or not isinstance(body, dict):
        return None
    value = body.get(policy.group_key)
    if value is None:
        return None
    try:
        return encode_group_id(value)
    except errors.InvalidInput as exc:
        raise errors.InvalidInput('body key {!r}: {}'.format(
            policy.group_key, exc))


def group_or_none(body, policy):
    """Like :func:`group_of`, but an unusable group id means "ungrouped".

    For messages that are already accepted (dead letters moving to another
    queue): they must never be stranded because that queue groups by a key
    whose value in this body is not a valid group id.
    """
    try:
        return group_of(body, policy)
    except errors.InvalidInput:
        return None


def prepare_messages(messages, policy, max_delay, max_ttl, checksum=False):
    """Validate posted messages; raise before anything is stored.

    With ``checksum``, each message gets the body checksum Zaqar's own
    drivers store (``MD5:<hex>``, Zaqar's ``enable_checksum``).
    """
    messages = list(messages)
    if not messages:
        raise errors.InvalidInput('at least one message must be posted')
    prepared = []
    ids = new_message_ids(len(messages))
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or 'body' not in message:
            raise errors.InvalidInput(
                'message {} must be an object with a body'.format(index))
        check_int('ttl', message.get('ttl'), 1, max_ttl)
        ttl = message['ttl']
        body = _storable_body(index, message['body'])
        try:
            body_json = _storable_text(_body_json(body))
        except (TypeError, ValueError) as exc:
            raise errors.InvalidInput(
                'message {} body is not JSON: {}'.format(index, exc))
        prepared.append(NewMessage(
            id=ids[index],
            ttl=ttl,
            delay=effective_delay(message, policy, max_delay),
            body=body,
            body_json=body_json,
            group=group_of(body, policy),
            checksum=(storage_utils.get_checksum(message['body'])
                      if checksum else None),
            sticky=bool(policy.sticky)))
    return prepared


# The variant nibble of a version 4 UUID (RFC 4122: 10xx), from any.
_VARIANT_NIBBLE = {digit: '89ab'[int(digit, 16) & 3]
                   for digit in '0123456789abcdef'}


def new_message_ids(count):
    """``count`` random UUIDs (version 4), written as ``str(uuid.uuid4())``
    writes them, from one read of ``os.urandom``: building a
    ``uuid.UUID`` per id cost 3 us, a third of a posted message's
    validation. The same 122 random bits per id."""
    digits = os.urandom(16 * count).hex()
    return ['%s-%s-4%s-%s%s-%s' % (
        one[:8], one[8:12], one[13:16], _VARIANT_NIBBLE[one[16]],
        one[17:20], one[20:])
        for one in (digits[at:at + 32] for at in range(0, 32 * count, 32))]


def carried_message(message_id, body, ttl, delay, age_ms, policy,
                    checksum=None):
    """A message moved in from another store (zaqar-delay-migrate), as
    stored there: its id, ttl and delay (seconds, counted from its
    creation ``age_ms`` ago), filed under the target queue's group key.
    Not checked against this store's post limits: it was accepted once,
    and a move must not drop it."""
    body = _storable_body(message_id, body)
    try:
        body_json = _body_json(body)
    except (TypeError, ValueError) as exc:
        # Zaqar's transport takes NaN and Infinity, which JSON has not.
        raise errors.InvalidInput('message {} body cannot be stored as '
                                  'JSON: {}'.format(message_id, exc))
    return NewMessage(id=message_id, ttl=ttl, delay=delay, body=body,
                      body_json=body_json, group=group_or_none(body, policy),
                      checksum=checksum, age_ms=age_ms,
                      sticky=bool(policy.sticky))


def _storable_body(index, body):
    """The body as JSON can hold it. Zaqar's transport hands encrypted
    bodies over as base64 bytes; they are kept as that (ASCII) text, which
    its decryption reads back unchanged."""
    if not isinstance(body, bytes):
        return body
    try:
        return body.decode('ascii')
    except UnicodeDecodeError:
        raise errors.InvalidInput(
            'message {} body is bytes that are not ASCII text; only JSON '
            'and Zaqar\'s base64-encrypted bodies can be stored'.format(
                index))


def check_claim_metadata(metadata, max_ttl, max_grace):
    """Return (ttl, grace) of a claim request, strictly validated against
    Zaqar's ``[transport] max_claim_ttl`` and ``max_claim_grace``."""
    if not isinstance(metadata, dict):
        raise errors.invalid_field('claim metadata', metadata, 'an object')
    ttl = check_int('claim ttl', metadata.get('ttl'), 1, max_ttl)
    grace = check_int('claim grace', metadata.get('grace', 0), 0, max_grace)
    return ttl, grace


def is_claim_id(value):
    """True for a claim id of the form our drivers hand out (a UUID as
    ``str(uuid.uuid4())`` writes it); anything else names no claim and
    never reaches a store. A pattern, not ``uuid.UUID``: it runs on
    every delete."""
    return isinstance(value, str) and _CLAIM_ID.fullmatch(value) is not None


# Zaqar's queue purge (POST /v2/queues/{name}/purge) pops this many
# messages at a time, whatever [transport] max_messages_per_claim_or_pop
# says: a driver bound below it would fail every purge.
ZAQAR_PURGE_POP = 100


def pop_bound(max_messages_per_claim_or_pop):
    """The most messages one pop may take: Zaqar's client bound, never
    less than what Zaqar's own purge asks for (a bound protects the store
    from clients, whose requests Zaqar's transport has already checked; it
    must not break Zaqar's own callers)."""
    return max(max_messages_per_claim_or_pop, ZAQAR_PURGE_POP)


# Where Zaqar's own queue (and topic) purges run: its v2 REST resources'
# ``on_post`` and its websocket API's ``queue_purge``.
_ZAQAR_PURGES = {
    ('zaqar.transport.wsgi.v2_0.purge', 'on_post'),
    ('zaqar.transport.wsgi.v2_0.topic_purge', 'on_post'),
    ('zaqar.api.v2.endpoints', 'queue_purge'),
}
# Frames between a purge and the controller's pop: Zaqar's decorators,
# its storage pipeline, profiler wrappers and ours.
_PURGE_SEARCH_DEPTH = 24


def called_by_zaqars_purge():
    """True when this pop is Zaqar's queue purge. Its pops of
    ZAQAR_PURGE_POP are told from a client's by their size alone only
    while Zaqar's transport bound is below it; an operator may raise the
    bound to 100 or more, and then only the caller tells (Zaqar passes
    nothing else down)."""
    frame = sys._getframe(1)
    for _ in range(_PURGE_SEARCH_DEPTH):
        frame = frame.f_back
        if frame is None:
            return False
        if (frame.f_globals.get('__name__'),
                frame.f_code.co_name) in _ZAQAR_PURGES:
            return True
    return False


def new_subscription_id():
    """A new subscription id whose text sorts in creation order (a
    MongoDB ObjectId, as Zaqar's MongoDB driver uses): Zaqar's clients page
    through subscriptions in id order, the marker being the last id seen."""
    return str(bson.ObjectId())


def check_limit(limit, maximum=None, field='limit'):
    """``limit`` if it is an int from 1 to ``maximum`` (Zaqar's
    ``[transport]`` bound for the operation, None: no bound), else raise."""
    if not is_strict_int(limit) or limit < 1:
        raise errors.invalid_field(field, limit, 'a positive integer')
    if maximum is not None and limit > maximum:
        raise errors.invalid_field(
            field, limit, 'an integer from 1 to {}'.format(maximum))
    return limit
