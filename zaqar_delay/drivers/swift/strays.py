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

So a deep pass, at most every SWEEP_EVERY_S for a queue, lists ``m/``
and looks at the ids no listed position names, written over DRAFT_AGE_S
ago (a post or copy has long finished or died), at most SETTLE_BATCH per
pass. Each is read, and its position
asked for by name (a listing can lag): one that names it is left to the
draft and expiry passes. An expired one goes as any removed message
(state.QueueState.remove: its filings, locks and group entry) but for
its position, which names another message. A live one goes only if it
is neither filed nor locked (drafts.filed_by_name): what is, is a
message. (A grouped one whose position went is removed by gc's group
repair first, with its group entry: groups.repair.)

"Over DRAFT_AGE_S ago" is Swift's last-modified time read with gc's
clock, as for abandoned locks (summary.age_s): a gc host whose clock
runs a minute ahead of Swift's could take an ``m/`` just written for an
old one. Only one whose position a rival's late PUT took between the
post's read-back and its filing, a few milliseconds, would then go
before its filing, and the post's client would be told it was stored.
Run NTP (docs/swift.md, *Time*).
"""

import random

from zaqar_delay.drivers.swift import drafts
from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import state
from zaqar_delay.drivers.swift import summary

# A sweep lists every ``m/`` of the queue, as long a listing as the
# ``p/`` one: a deep pass that sweeps costs a quarter more (1,000
# messages on the test Swift, 2026-12-07). Strays are leftovers of rare
# failures, so a queue is swept at most this often (summary.swept).
SWEEP_EVERY_S = summary.DEEP_EVERY_S


def sweep(qs, positions, now):
    """Remove the strays of the queue of ``qs`` (``positions``: id ->
    ``p/`` fields of the positions gc listed). Returns True if more may be
    waiting: suspects were left for the next pass, and this one removed
    some (ones it kept, still filed or locked, are no reason to hurry).
    Beyond SETTLE_BATCH suspects, a pass looks at a random sample, so
    that those kept cannot hold the others back pass after pass."""
    suspects = [mid for mid, entry in (
        (names.parse_message_obj(e['name']), e)
        for e in qs.store.listing_all(qs.c, 'm/'))
        if mid not in positions
        and summary.age_s(entry, now) > drafts.DRAFT_AGE_S]
    waiting = len(suspects) > state.SETTLE_BATCH
    if waiting:
        suspects = random.sample(suspects, state.SETTLE_BATCH)
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
    return waiting and bool(expired or unfiled)


def _verdict(qs, message_id, now):
    """(True, message) for an expired stray, (False, message) for a live
    one neither filed nor locked, None for one to leave."""
    found = qs.store.get_json(qs.c, names.message_obj(message_id))
    if found is None:
        return None
    message = state.Message(message_id, *found)
    if qs.names_it(message_id, message.pos):
        return None
    if message.expires <= now:
        return True, message
    if drafts.filed_by_name(qs, message_id, message.pos, message.gk,
                            message.due, now):
        return None
    return False, message
