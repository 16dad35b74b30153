"""Listing and redriving a type's dead-lettered events.

Zaqar's REST API does not show a message's claim count, so the attempts
reported for a dead letter are the source queue's ``_max_claim_count``: a
message is moved to the dead-letter queue when it is about to be claimed
once more than that, so every dead letter was claimed exactly that often
(a claim lost to a crash or released by close() counts as an attempt).

A redrive takes dead letters only under its own claim, so two redrives
never move the same one: it claims the dead-letter queue a page at a time,
posts the letters it moves to their type's queue as new events, due at
once, with body and context kept, and deletes them under the claim. Zaqar
cannot claim by id, so a redrive by id first reads the ids (those another
claim holds are skipped and reported ``held``) and then claims pages until
it has taken the rest; the pages it passes over stay claimed until it ends,
so that each claim reaches further. A redrive interrupted between the post
and the delete leaves the letter under its claim: redrives within the
claim's 60 s report it held, a later one posts it again (delivery stays at
least once).
"""

import dataclasses
import logging
import time

from zaqar_delay.worker import events
from zaqar_delay.worker import settings as zd_settings
from zaqar_delay.worker import zaqar

LOG = logging.getLogger(__name__)


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


@dataclasses.dataclass(frozen=True)
class RedriveResult:
    #: ids of the dead letters posted back and deleted under our claim
    moved: list
    #: ids named in a redrive by id that another claim holds (a redrive or
    #: reader in progress): not posted, still dead letters
    held: list


def redrive(app, name, ids=None):
    queue, dead = _queues(app, name)
    if ids is None:
        return RedriveResult(_move(app, queue, dead), [])
    return _redrive_ids(app, queue, dead, _check_ids(ids))


def _check_ids(ids):
    ids = list(ids)
    for message_id in ids:
        if not isinstance(message_id, str) or not message_id:
            raise ValueError('message ids must be non-empty strings; got '
                             '{!r}'.format(message_id))
    return list(dict.fromkeys(ids))


def _redrive_ids(app, queue, dead, ids):
    free = {m.id for m in app.connection.get_many(dead, ids)
            if m.claim_id is None and events.is_envelope(m.body)}
    moved = _move(app, queue, dead, free) if free else []
    left = [i for i in ids if i not in moved]
    held = [m.id for m in app.connection.get_many(dead, left) if m.claim_id]
    return RedriveResult(moved, held)


def _move(app, queue, dead, wanted=None):
    """Claim ``dead`` a page at a time and move its events (those in
    ``wanted`` only, when given) to ``queue``; the ids moved.

    Stops when nothing more is claimable, when every wanted id was taken,
    or when a page brings back a letter left behind earlier (claims that
    expired during a very long pass) or one of its own copies (its
    handler still failing, it came back as a dead letter under the copy's
    id): it is not moved twice."""
    moved, taken, left_behind, passed = [], set(), set(), []
    copies = set()
    try:
        while wanted is None or not wanted <= taken:
            claim, messages = app.connection.claim(
                dead, zaqar.PAGE, zd_settings.MIN_CLAIM_TTL,
                zd_settings.MIN_CLAIM_TTL)
            if not messages:
                break
            came_round = any(m.id in left_behind or m.id in copies
                             for m in messages)
            chosen = [m for m in messages if events.is_envelope(m.body)
                      and (wanted is None or m.id in wanted)
                      and m.id not in copies]
            copies.update(_repost(app, queue, chosen))
            taken.update(m.id for m in chosen)
            for message in chosen:
                if _delete(app, dead, message.id, claim.id):
                    moved.append(message.id)
                else:
                    left_behind.add(message.id)
            passed_over = [m.id for m in messages if m.id not in taken]
            if passed_over:
                left_behind.update(passed_over)
                passed.append(claim)
            if came_round:
                break
    finally:
        # Not the claim of a page whose post or deletes an error cut
        # short: its letters, maybe posted already, stay claimed so that
        # a retried redrive skips them.
        for claim in passed:
            _release(claim)
    return moved


def _repost(app, queue, messages):
    """Post the envelopes of ``messages`` to ``queue``, due now; the
    copies' ids."""
    if not messages:
        return []
    return app.connection.post(queue, [
        {'ttl': app.settings.event_ttl, 'delay': 0,
         'body': dict(m.body, due=time.time())} for m in messages])


def _delete(app, dead, message_id, claim_id):
    """Delete a dead letter under our claim; False when it is no longer
    ours (our claim ended: 400 if nobody holds the letter, 403 if another
    claim does), so the copy just posted may not be the only one."""
    try:
        app.connection.delete(dead, message_id, claim_id)
        return True
    except zaqar.NOT_OURS:
        LOG.warning('dead letter %s in %s was posted back but our claim on '
                    'it ended; it may be redriven again', message_id, dead)
        return False


def _release(claim):
    try:
        claim.delete()
    except zaqar.GONE:
        pass
