"""Pops on Swift: who decides what happened to a pop that failed midway.

A pop locks its messages (``l/<id>/<k>``, ``c=pop;o=<pop id>``), reads
them, and then creates its outcome ``o/<pop id>`` with ``s=done`` before
it answers: from then on it hands the messages out, even if removing
them fails (gc finishes the removal: the client has them). A pop that
fails before that point answers 503 and its client got nothing, so gc,
finding its locks abandoned, creates the outcome ``s=released`` and files
the messages again (the next attempt, as when a claim ends).

Both sides create the same object with If-None-Match and read it back
(Store.create), so they agree: a pop slower than gc's patience that
finds ``released`` hands out nothing; gc that finds ``done`` removes the
messages. A retried request (lost reply) reads back its own token and
keeps its decision.
"""

import time

from oslo_log import log as logging

from zaqar_delay import errors
from zaqar_delay.drivers.swift import names

LOG = logging.getLogger(__name__)

# How long a pop keeps asking for its outcome while Swift is unreachable.
# Its PUT may have landed with the reply lost: answering 503 then would
# leave gc to remove messages nobody got. Well under gc's patience
# (driver.GC_ABANDONED_S), which a pop must not outlast.
OUTCOME_PATIENCE_S = 20
OUTCOME_RETRY_S = 1


def decide(qs, pop_id, outcome, expires_ms):
    """Record ``outcome`` for pop ``pop_id`` unless one is recorded
    already; return the outcome that stands. The object lives until the
    last of its messages expired (``expires_ms``), past any lock of it."""
    name = names.outcome_obj(pop_id)
    if qs.store.create(qs.c, name, content_type=names.content_type(
            s=outcome), headers=qs.delete_at(expires_ms)):
        return outcome
    found = qs.store.head(qs.c, name)
    if found is None:
        # Deleted after a finished pop removed its messages (and locks).
        return names.DONE
    return names.ct_params(found.get('content-type')).get('s')


def finish(qs, pop_id, won, now):
    """Hand out what pop ``pop_id`` won (``won``: (a/ entry, message)),
    once its outcome is ``done``; remove the messages, or leave that to gc
    if Swift fails now."""
    if not won:
        return []
    expires = max(message.expires for _, message in won)
    if _decide_patiently(qs, pop_id, expires) != names.DONE:
        # gc took this pop for abandoned and gave the messages back.
        return []
    out = [message.render(now, claim_count=entry[2] - 1)
           for entry, message in won]
    try:
        qs.remove([(m.id, m.pos, entry[2], m.gk) for entry, m in won], now)
        qs.store.delete(qs.c, names.outcome_obj(pop_id))
    except errors.BackendUnavailable as exc:
        LOG.warning('pop %s in %s: removal left to gc (%s)', pop_id, qs.c,
                    exc)
    return out


def _decide_patiently(qs, pop_id, expires):
    """decide(done), asked again while Swift fails: a new attempt reads
    what the lost one wrote (done is done, whoever's token it holds)."""
    deadline = time.monotonic() + OUTCOME_PATIENCE_S
    while True:
        try:
            return decide(qs, pop_id, names.DONE, expires)
        except errors.BackendUnavailable:
            if time.monotonic() >= deadline:
                raise
            time.sleep(OUTCOME_RETRY_S)


def abandoned(qs, message, attempt, pop_id, now):
    """gc: ``message``'s latest lock (``attempt``) is a pop that took too
    long. Remove the message if that pop answered, else file it again."""
    outcome = names.RELEASED if pop_id is None else decide(
        qs, pop_id, names.RELEASED, message.expires)
    if outcome == names.DONE:
        qs.remove([(message.id, message.pos, None, message.gk)], now)
    else:
        qs.make_available(message.pos, message.id, attempt + 1, now, now,
                          message.gk, message.client)
