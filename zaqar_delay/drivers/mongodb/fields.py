"""Every MongoDB collection, stored field and index of the driver.

Project and queue names, message ids, claim ids, group ids and bodies are
only ever *values* in a query, never field names, so no name a tenant picks
can become an operator or a path. Bodies and subscription options are
stored as JSON text (``b``, ``o``): a key such as ``$where`` or ``a.b`` in a
body is a character string inside a string and cannot bend a query.

Collection ``messages``, one document per message:

=======  ==============================================================
field    meaning
=======  ==============================================================
``_id``  message id (UUID text); unique across the database
``p``    project (``None`` for the default project)
``q``    queue name
``k``    position in the queue (marker), from the ``counters`` document
``s``    state: ``r`` ready (claimable), ``d`` delayed (waiting for
         ``d``), ``c`` claimed (see ``c``/``ce``), ``b`` blocked (a
         grouped message behind its group's head), ``w`` waiting (a
         blocked member not due yet: ``b`` once due), ``m`` moving
         (frozen by a group move, see ``mi``)
``b``    body, JSON text
``t``    ttl, seconds (raised by claims to the claim's ttl + grace, as
         Zaqar's drivers show a claimed message)
``cr``   created, epoch ms (store clock)
``e``    expires, epoch ms (created + ttl, raised by claims to claim
         expiry + grace)
``d``    due, epoch ms: created + delay; for a claimed message, claim
         expiry + redelivery delay (when it is claimable again if the
         claim lapses); for a released one, release time + that delay
``u``    client UUID of the poster (for ``echo``)
``cc``   claim count (attempts)
``c``    claim id; present only while claimed
``ce``   claim expiry, epoch ms; present only while claimed
``rd``   redelivery delay (s) of the queue when last claimed
``g``    group id (JSON-encoded), absent for ungrouped messages
``cs``   body checksum (``MD5:<hex>``), present only when Zaqar's
         ``enable_checksum`` was on at post time
``h``    the group id again, present only on the group's *head*: the
         one member that may be ``r``, ``d`` or ``c`` (unique index
         ``zd_group_head`` on ``{p, q, h}``)
``mi``   move id of a group move in progress (only while ``s`` is ``m``)
``mt``   that move's target queue
``mk``   the position reserved for this message in the target queue
``mv``   when the move started, epoch ms (stale moves are finished by gc)
``mr``   ``[first, count]``: the target positions the move reserved for
         the page of the group this message was frozen with
``pn``   on a sticky queue, the client the head's group is pinned to
         (pins.py): only that client's claims read it
=======  ==============================================================

States move only through single-document conditional updates (each
filter names the state it leaves), so a message is handed out once:
``r -> c`` (claim), ``c -> d`` (claim lapsed or released),
``d -> r`` (due), ``b -> r|d`` (promoted to group head, setting ``h``),
``r|d|b -> m -> another queue`` (group move) and any state -> another
queue's ``r`` or ``b`` (dead-lettered). Grouped messages are posted as
``b``; only the head of a group (the one carrying ``h``) ever leaves it,
so ``r``, ``d`` and ``c`` never hold two members of one group.

Collection ``claims``: ``_id`` claim id, ``p``, ``q``, ``t`` ttl (s),
``e`` claim expiry (epoch ms), ``g`` grace (s), ``rd`` redelivery delay (s),
``x`` present once settling has ended the claim (no renew succeeds after
it; state.end_claims). It is the authority on when a claim ends: a
message's ``ce`` never exceeds its claim's ``e``.

Collection ``counters``: ``p``, ``q``, ``n`` last position handed out,
``gr`` the last group id that gc's head repair checked (its cursor),
``rm`` how many messages retention has removed from the queue (the
``removed`` of its stats), ``lf`` the highest length cutoff found so far
(positions below it are beyond ``length`` for good; retention.py),
``rv`` the positions reserved and not yet stored, ``{<token>: {s first
position, c how many, a reserved at (epoch ms)}}`` (reservations.py),
``x`` when the TTL monitor removes the counter of a deleted queue (a
date; null once the queue of its name takes a position again, or gc
finds messages in it).
One document per queue, also the registry of queues that ``gc()`` walks.

Collection ``given_up``: ``p``, ``q``, ``k`` a position its writer
reserved and stored no message at (given_up.py); a persistent consumer
does not count it as lost.

Collection ``moves``: one document per group move in progress (see
group_moves.py): ``_id`` move id, ``p``, ``q`` source queue, ``g`` group,
``t`` target queue, ``st`` decision (``f`` freezing, ``c`` committed,
``a`` aborted), ``v`` start (epoch ms).

Collection ``pins``: one document per group pinned to a client on a
sticky queue (pins.py): ``p``, ``q``, ``g`` group, ``cl`` the client,
``t`` when it was pinned (epoch ms).

Collection ``sticky_clients``: one document per client that claimed on a
sticky queue (pins.py): ``p``, ``q``, ``cl`` the client, ``a`` its last
claim, renewal or delete (epoch ms), ``u`` active until (``a`` + the
sticky time), ``st`` the queue's sticky time (ms) at its last claim.

Collection ``queue_meta``: a copy of each queue's metadata from Zaqar's
control store, kept exact by a generation (metadata.py): ``_id`` JSON
text of ``[project, queue]``, ``gen`` generation, ``m`` the copy (JSON
text) and ``ce`` its end (epoch ms), absent while there is no copy;
``x`` when the TTL monitor removes the document (a date).

Collection ``subscriptions``: ``_id`` id (UUID text), ``p``, ``s`` source
queue, ``u`` subscriber URI, ``t`` ttl (s), ``e`` expires (epoch ms),
``x`` expires as a date (TTL index), ``o`` options (JSON text), ``c``
confirmed, ``k`` creation order (ObjectId); a persistent consumer's
state besides (consumers.py; ``cm`` true marks one).

Collection ``carried``: one document per message ``zaqar-delay-migrate``
carried in (messages.carry_in): ``_id`` the message id, ``p`` project,
``x`` when the TTL monitor removes it (a date: the message's expiry plus
CARRIED_MARGIN_MS). A move run again skips these ids, so what a consumer
deleted here is not stored again while the source still holds it.

Ready for later features without migrating documents: persistent-consumer
cursors are positions ``k``; redelivery backoff reads ``cc`` and ``rd``.
"""

import pymongo

MESSAGES = 'messages'
CLAIMS = 'claims'
COUNTERS = 'counters'
SUBSCRIPTIONS = 'subscriptions'
MOVES = 'moves'
GIVEN_UP = 'given_up'
PINS = 'pins'
STICKY_CLIENTS = 'sticky_clients'
QUEUE_META = 'queue_meta'
CARRIED = 'carried'
# One document, {_id: LAYOUT_ID, v: version}: the layout version (layout.py).
LAYOUT = 'layout'
LAYOUT_ID = 'layout'

# Message states (field ``s``).
READY = 'r'
DELAYED = 'd'
CLAIMED = 'c'
BLOCKED = 'b'
# A blocked group member not due yet (``d > now``): outside the ranges a
# listing of due messages walks; settling makes it ``b`` once due.
WAITING = 'w'
MOVING = 'm'

PROJECT, QUEUE, POSITION, STATE = 'p', 'q', 'k', 's'
BODY, TTL, CREATED, EXPIRES, DUE = 'b', 't', 'cr', 'e', 'd'
CLIENT, CLAIM_COUNT, CLAIM, CLAIM_EXPIRES = 'u', 'cc', 'c', 'ce'
REDELIVERY, GROUP, HEAD, CHECKSUM = 'rd', 'g', 'h', 'cs'
MOVE_ID, MOVE_TARGET, MOVE_POSITION, MOVE_STARTED = 'mi', 'mt', 'mk', 'mv'
MOVE_RANGE = 'mr'
GROUP_CURSOR = 'gr'
REMOVED = 'rm'
LENGTH_FLOOR = 'lf'
READ_FLOOR = 'rf'
RESERVATIONS = 'rv'
ENDED = 'x'
# Sticky groups (pins.py): a head's pin; a pin's client and time; a sticky
# client's last activity, end of activity and sticky time.
PIN = 'pn'
PIN_CLIENT, PINNED_AT = 'cl', 't'
ACTIVE_AT, ACTIVE_UNTIL, STICKY_MS = 'a', 'u', 'st'
# queue_meta (metadata.py): generation, copy, copy's end, removal date,
# and whether the queue had no persistent consumer when copied.
META_GEN = 'gen'
META_COPY = 'm'
META_COPY_ENDS = 'ce'
META_REMOVED_AT = 'x'
META_NO_CONSUMERS = 'nc'
# carried: kept this long past the message's expiry, so that the source
# store's clock running behind MongoDB's cannot let a record go while the
# source still counts its message live.
CARRIED_UNTIL = 'x'
CARRIED_MARGIN_MS = 3600 * 1000

ASC = pymongo.ASCENDING

# name -> (keys, options). Names are what queries hint (see queries.py).
MESSAGE_INDEXES = {
    # Unique positions per queue; listing with claimed/delayed included,
    # bulk counts and purge (prefix p, q).
    'zd_position': ([(PROJECT, ASC), (QUEUE, ASC), (POSITION, ASC)],
                    {'unique': True}),
    # Claim and list of ready messages in position order; counts by state.
    'zd_state_position': ([(PROJECT, ASC), (QUEUE, ASC), (STATE, ASC),
                           (POSITION, ASC)], {}),
    # Promotion of delayed messages that are due.
    'zd_state_due': ([(PROJECT, ASC), (QUEUE, ASC), (STATE, ASC),
                      (DUE, ASC)], {}),
    # Messages too old for the queue's retention time, by state: only
    # the keepable states are removed (retention.py).
    'zd_state_created': ([(PROJECT, ASC), (QUEUE, ASC), (STATE, ASC),
                          (CREATED, ASC)], {}),
    # Expired messages of a queue (purge, stats, gc).
    'zd_expires': ([(PROJECT, ASC), (QUEUE, ASC), (EXPIRES, ASC)], {}),
    # Group ids of a queue (stats, listing, repair), and the order inside
    # a group (the next head is the lowest live position).
    'zd_group': ([(PROJECT, ASC), (QUEUE, ASC), (GROUP, ASC),
                  (POSITION, ASC)], {}),
    # At most one head per group and queue: promoting a second member of
    # a group fails with a duplicate key, whoever tries it.
    'zd_group_head': ([(PROJECT, ASC), (QUEUE, ASC), (HEAD, ASC)],
                      {'unique': True,
                       'partialFilterExpression': {HEAD: {'$exists': True}}}),
    # A sticky claim's ready heads: its own pinned ones and the unpinned
    # ones (``pn`` null), two ranges merged by position; heads pinned to
    # other clients are outside both. Partial: only ready messages.
    'zd_ready_pin': ([(PROJECT, ASC), (QUEUE, ASC), (PIN, ASC),
                      (POSITION, ASC)],
                     {'partialFilterExpression': {STATE: READY}}),
    # Messages of one claim, in position order. Partial: only claimed
    # messages are in it, and every query on it says ``s: c``.
    'zd_claim': ([(CLAIM, ASC), (POSITION, ASC)],
                 {'partialFilterExpression': {STATE: CLAIMED}}),
}

CLAIM_INDEXES = {
    # Claims of a queue that have ended (settle, gc, purge).
    'zd_claim_expires': ([(PROJECT, ASC), (QUEUE, ASC), (EXPIRES, ASC)], {}),
}

COUNTER_INDEXES = {
    'zd_counter_queue': ([(PROJECT, ASC), (QUEUE, ASC)], {'unique': True}),
    # MongoDB's TTL monitor removes a deleted queue's counter a day after
    # the deletion, unless the queue of its name is posted to again.
    'zd_counter_ttl': ([('x', ASC)], {'expireAfterSeconds': 0}),
}

MOVE_INDEXES = {
    # Moves from a queue that started before a time (gc finishes them).
    'zd_move_started': ([(PROJECT, ASC), (QUEUE, ASC), ('v', ASC)], {}),
}

SUBSCRIPTION_INDEXES = {
    'zd_sub_subscriber': ([('p', ASC), ('s', ASC), ('u', ASC)],
                          {'unique': True}),
    'zd_sub_order': ([('p', ASC), ('s', ASC), ('k', ASC)], {}),
    # Zaqar's notifier's listing, on every post: consumers (``cm`` true,
    # consumers.py) are outside its bounds, never examined.
    'zd_sub_notified': ([('p', ASC), ('s', ASC), ('cm', ASC), ('k', ASC)],
                        {}),
    # The lowest position handed to a consumer of a queue: one probe
    # (given_up.lowest_countable). Only consumers that were handed one.
    'zd_sub_handed': ([('p', ASC), ('s', ASC), ('ch', ASC)],
                      {'partialFilterExpression': {'ch': {'$exists': True}}}),
    # Live and idle persistent consumers counted by when they were last
    # active, and the lowest cursor of the live ones, from index keys
    # (consumers.live_readers), not by reading every consumer: only
    # consumers carry ``ca``.
    'zd_sub_active': ([('p', ASC), ('s', ASC), ('ca', ASC), ('e', ASC)],
                      {'partialFilterExpression': {'ca': {'$exists': True}}}),
    'zd_sub_cursor': ([('p', ASC), ('s', ASC), ('ck', ASC), ('ca', ASC),
                       ('e', ASC)],
                      {'partialFilterExpression': {'ca': {'$exists': True}}}),
    # MongoDB's TTL monitor removes expired subscriptions; reads also
    # filter on ``e``, so the monitor's lag is never visible.
    'zd_sub_ttl': ([('x', ASC)], {'expireAfterSeconds': 0}),
}

GIVEN_UP_INDEXES = {
    # One document per given-up position; counted by range.
    'zd_given_up': ([(PROJECT, ASC), (QUEUE, ASC), (POSITION, ASC)],
                    {'unique': True}),
}

PIN_INDEXES = {
    # At most one pin per group.
    'zd_pin_group': ([(PROJECT, ASC), (QUEUE, ASC), (GROUP, ASC)],
                     {'unique': True}),
    # A client's pins, oldest first (freed in batches once it is idle;
    # counted by stats).
    'zd_pin_client': ([(PROJECT, ASC), (QUEUE, ASC), (PIN_CLIENT, ASC),
                       (PINNED_AT, ASC)], {}),
}

STICKY_CLIENT_INDEXES = {
    'zd_sticky_client': ([(PROJECT, ASC), (QUEUE, ASC), (PIN_CLIENT, ASC)],
                         {'unique': True}),
    # The client whose activity ended first (the next one to free).
    'zd_sticky_until': ([(PROJECT, ASC), (QUEUE, ASC), (ACTIVE_UNTIL, ASC)],
                        {}),
}

QUEUE_META_INDEXES = {
    # MongoDB's TTL monitor removes a queue's generation a day after its
    # last change (metadata_copy.GENERATION_TTL_MS).
    'zd_queue_meta_ttl': ([(META_REMOVED_AT, ASC)],
                          {'expireAfterSeconds': 0}),
}

CARRIED_INDEXES = {
    # MongoDB's TTL monitor removes a record once its message expired in
    # the source too; nothing reads the dates.
    'zd_carried_ttl': ([(CARRIED_UNTIL, ASC)], {'expireAfterSeconds': 0}),
}

INDEXES = {
    MESSAGES: MESSAGE_INDEXES,
    PINS: PIN_INDEXES,
    STICKY_CLIENTS: STICKY_CLIENT_INDEXES,
    GIVEN_UP: GIVEN_UP_INDEXES,
    CLAIMS: CLAIM_INDEXES,
    COUNTERS: COUNTER_INDEXES,
    SUBSCRIPTIONS: SUBSCRIPTION_INDEXES,
    MOVES: MOVE_INDEXES,
    QUEUE_META: QUEUE_META_INDEXES,
    CARRIED: CARRIED_INDEXES,
}


def queue_filter(queue, project, **more):
    """``{p: project, q: queue, ...}``: names are values, never keys."""
    query = {PROJECT: project, QUEUE: queue}
    query.update(more)
    return query
