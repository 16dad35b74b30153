"""gc: message objects (``m/``) that no position names ("strays").

``m/`` has no X-Delete-At (since 2026-12-07; names.py): Swift's expiry
queue cost its PUT and its DELETE a container update each, about a
tenth of a post's and of a claimer's delete's Swift CPU. What Swift used
to remove at a message's expiry, gc's deep pass now removes:

* a post that lost a position to another node, gave back the others and
  died (or could not delete) before deleting the messages it had
  written under the ids it gave up (posts.py): never filed, no position
  names them;
* a removal whose bulk delete took the position but not ``m/`` (it
  fails object by object), and nobody retried it;
* a message whose position a rival's PUT landing after its read-back
  took (docs/swift.md, *Claim exclusivity*): still a message, filed and
  handed out, until it expires.

So a deep pass lists ``m/`` and looks at the ids no listed position
names, written over DRAFT_AGE_S ago (a post or copy has long finished or
died), at most SETTLE_BATCH per pass. Each is read, and its position
asked for by name (a listing can lag): one that names it is left to the
draft and expiry passes. An expired one goes with everything it has but
the position, which is another message's. A live one goes only if it is
neither filed nor locked (drafts.filed_by_name): what is, is a message.
"""

from zaqar_delay.drivers.swift import drafts
from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import state
from zaqar_delay.drivers.swift import summary


def sweep(qs, positions, now):
    """Remove the strays of the queue of ``qs`` (``positions``: id ->
    ``p/`` fields of the positions gc listed). Returns how many it looked
    at (SETTLE_BATCH: more may be waiting)."""
    suspects = [mid for mid, entry in (
        (names.parse_message_obj(e['name']), e)
        for e in qs.store.listing_all(qs.c, 'm/'))
        if mid not in positions
        and summary.age_s(entry, now) > drafts.DRAFT_AGE_S]
    suspects = suspects[:state.SETTLE_BATCH]
    verdicts = qs.store.parallel(lambda mid: _verdict(qs, mid, now),
                                 suspects)
    expired = [found for found in verdicts if found and found[0]]
    unfiled = [found[1] for found in verdicts if found and not found[0]]
    if expired:
        qs.remove([(m.id, m.pos, None, m.gk) for _, m in expired], now,
                  positions=False)
    if unfiled:
        # The marker first, as drafts._remove does: a copy's ``r/`` left
        # alone would have the next copy of it skipped as consumed.
        qs.store.delete_many(qs.c, [names.received_obj(m.id)
                                    for m in unfiled])
        qs.store.delete_many(qs.c, [names.message_obj(m.id)
                                    for m in unfiled])
    return len(suspects)


def _verdict(qs, message_id, now):
    """(True, message) for an expired stray, (False, message) for a live
    one neither filed nor locked, None for one to leave."""
    found = qs.store.get_json(qs.c, names.message_obj(message_id))
    if found is None:
        return None
    message = state.Message(message_id, *found)
    position = qs.store.head(qs.c, names.position_obj(message.pos))
    if position is not None and names.ct_params(
            position.get('content-type')).get('id') == message_id:
        return None
    if message.expires <= now:
        return True, message
    if drafts.filed_by_name(qs, message_id, message.pos, message.gk,
                            message.due, now):
        return None
    return False, message
