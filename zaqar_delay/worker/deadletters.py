"""Listing and redriving a type's dead-lettered events.

Zaqar's REST API does not show a message's claim count, so the attempts
reported for a dead letter are the source queue's ``_max_claim_count``: a
message is moved to the dead-letter queue when it is about to be claimed
once more than that, so every dead letter was claimed exactly that often
(a claim lost to a crash or released by close() counts as an attempt).

Redrive claims a page of dead letters (so that two redrives never move the
same one), posts them to their type's queue as new events, due at once,
with body and context kept, then deletes them under the claim. A redrive
interrupted between the post and the delete leaves both copies: delivery
stays at least once.
"""

import dataclasses
import time

from zaqar_delay.worker import events
from zaqar_delay.worker import settings as zd_settings
from zaqar_delay.worker import zaqar


@dataclasses.dataclass(frozen=True)
class DeadLetter:
    id: str
    type: str
    data: object
    context: dict
    #: the age (s) Zaqar reports for it in the dead-letter queue
    age: int
    attempts: int


def _queues(app, name):
    queue = events.queue_name(app.prefix, name)
    return queue, events.dead_letter_queue(queue)


def list_dead(app, name, limit=None):
    queue, dead = _queues(app, name)
    attempts = app.connection.metadata(queue).get('_max_claim_count')
    out = []
    for message in app.connection.messages(dead, limit):
        body = message.body
        if events.is_envelope(body):
            out.append(DeadLetter(message.id, body['type'], body['data'],
                                  body.get('context') or {}, message.age,
                                  attempts))
    return out


def _repost(app, queue, messages):
    """Post the envelopes of ``messages`` to ``queue``, due now; returns the
    messages whose body was an event (others stay where they are)."""
    movable = [m for m in messages if events.is_envelope(m.body)]
    if movable:
        app.connection.post(queue, [
            {'ttl': app.settings.event_ttl, 'delay': 0,
             'body': dict(m.body, due=time.time())} for m in movable])
    return movable


def redrive(app, name, ids=None):
    queue, dead = _queues(app, name)
    if ids is not None:
        return _redrive_ids(app, queue, dead, list(ids))
    moved = 0
    held = []
    while True:
        claim, messages = app.connection.claim(
            dead, zaqar.PAGE, zd_settings.MIN_CLAIM_TTL,
            zd_settings.MIN_CLAIM_TTL)
        if not messages:
            break
        movable = _repost(app, queue, messages)
        for message in movable:
            _delete(app, dead, message.id, claim.id)
        moved += len(movable)
        if len(movable) < len(messages):
            held.append(claim)
    for claim in held:
        # Bodies that are not events stay, and are claimable again.
        claim.delete()
    return moved


def _redrive_ids(app, queue, dead, ids):
    for message_id in ids:
        if not isinstance(message_id, str) or not message_id:
            raise ValueError('message ids must be non-empty strings; got '
                             '{!r}'.format(message_id))
    movable = _repost(app, queue, app.connection.get_many(dead, ids))
    for message in movable:
        _delete(app, dead, message.id)
    return len(movable)


def _delete(app, queue, message_id, claim_id=None):
    try:
        app.connection.delete(queue, message_id, claim_id)
    except zaqar.GONE:
        pass
