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
         ``d``), ``c`` claimed (see ``c``/``ce``)
``b``    body, JSON text
``t``    ttl, seconds
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
=======  ==============================================================

States move only through single-document conditional updates (each
filter names the state it leaves), so a message is handed out once:
``r -> c`` (claim), ``c -> d`` (claim lapsed or released),
``d -> r`` (due), and any state -> another queue's ``r`` (dead-lettered).

Collection ``claims``: ``_id`` claim id, ``p``, ``q``, ``t`` ttl (s),
``e`` claim expiry (epoch ms), ``g`` grace (s), ``rd`` redelivery delay (s).
It is the authority on when a claim ends: a message's ``ce`` never exceeds
its claim's ``e``.

Collection ``counters``: ``p``, ``q``, ``n`` last position handed out. One
document per queue, also the registry of queues that ``gc()`` walks.

Collection ``subscriptions``: ``_id`` id (UUID text), ``p``, ``s`` source
queue, ``u`` subscriber URI, ``t`` ttl (s), ``e`` expires (epoch ms),
``x`` expires as a date (TTL index), ``o`` options (JSON text), ``c``
confirmed, ``k`` creation order (ObjectId).

Ready for later features without migrating documents: groups use the
``{p, q, g, k}`` index over ``g`` (docs/mongodb.md has the plan);
persistent-consumer cursors are positions ``k``; redelivery backoff reads
``cc`` and ``rd``.
"""

import pymongo

MESSAGES = 'messages'
CLAIMS = 'claims'
COUNTERS = 'counters'
SUBSCRIPTIONS = 'subscriptions'

# Message states (field ``s``).
READY = 'r'
DELAYED = 'd'
CLAIMED = 'c'

PROJECT, QUEUE, POSITION, STATE = 'p', 'q', 'k', 's'
BODY, TTL, CREATED, EXPIRES, DUE = 'b', 't', 'cr', 'e', 'd'
CLIENT, CLAIM_COUNT, CLAIM, CLAIM_EXPIRES = 'u', 'cc', 'c', 'ce'
REDELIVERY, GROUP = 'rd', 'g'

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
    # Expired messages of a queue (purge, stats, gc).
    'zd_expires': ([(PROJECT, ASC), (QUEUE, ASC), (EXPIRES, ASC)], {}),
    # Group ids of a queue (stats), and the order inside a group.
    'zd_group': ([(PROJECT, ASC), (QUEUE, ASC), (GROUP, ASC),
                  (POSITION, ASC)], {}),
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
}

SUBSCRIPTION_INDEXES = {
    'zd_sub_subscriber': ([('p', ASC), ('s', ASC), ('u', ASC)],
                          {'unique': True}),
    'zd_sub_order': ([('p', ASC), ('s', ASC), ('k', ASC)], {}),
    # MongoDB's TTL monitor removes expired subscriptions; reads also
    # filter on ``e``, so the monitor's lag is never visible.
    'zd_sub_ttl': ([('x', ASC)], {'expireAfterSeconds': 0}),
}

INDEXES = {
    MESSAGES: MESSAGE_INDEXES,
    CLAIMS: CLAIM_INDEXES,
    COUNTERS: COUNTER_INDEXES,
    SUBSCRIPTIONS: SUBSCRIPTION_INDEXES,
}


def queue_filter(queue, project, **more):
    """``{p: project, q: queue, ...}``: names are values, never keys."""
    query = {PROJECT: project, QUEUE: queue}
    query.update(more)
    return query
