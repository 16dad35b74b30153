"""Every Redis key zaqar-delay writes, and every field it stores.

All keys of one queue share the hash tag ``{<project>/<queue>}``, so a queue
lives in one Redis Cluster slot and each Lua script touches one slot. Project
and queue names are percent-encoded before they enter a key, so no name can
forge a separator, a brace or another tenant's prefix.

Redis Cluster and undeclared keys: every script declares the queue's fixed
keys in ``KEYS`` (which is how a cluster client routes it to the queue's
master), but builds per-message, per-claim, per-group and per-consumer keys
(``Q:m:<id>`` and the like below) from the prefix in ``ARGV[1]``. They
cannot be declared: a claim learns which message hashes it touches only
while it runs, by popping ids from ``avail``. Redis 7.0 runs a script's
undeclared keys when the node serves their slot and fails the script
("non local key") otherwise, so these keys must never leave the declared
keys' slot: each carries the same closed hash tag, hence the same slot,
wherever the cluster moves it (a migration moves whole slots). The contract
suite runs every script on a real 3-master cluster
(``tests/contract/conftest.py``), and ``tests/redis/test_cluster.py``
checks that every key a workload leaves on the cluster is tagged so. (A
key of another slot would not even fail reliably: Redis 7.0 accepts it
when the same node happens to serve both slots.) The price: while a slot
migrates (resharding), Redis moves its keys one at a time, and a script
whose declared keys are all still on the source but which touches a
message hash already moved fails at that command, after its earlier
writes; with every key declared, Redis would refuse the whole script
(TRYAGAIN or ASK) before it ran. So slots must not be moved while their
queues are in use (docs/scaling.md, Redis Cluster). No script touches
two queues: a dead letter or a moved group leaves through the source's
outbox, and ``outbox.py`` posts it to the target in a separate call. The
one global key, the queue registry, is only written and read by single
commands, never in a script or a pipeline with queue keys.

Queue keys (``Q`` = ``zd:{<project>/<queue>}``):

=================  ======  ==================================================
key                type    holds
=================  ======  ==================================================
``Q:msgs``         zset    every live message id, scored by position (marker)
``Q:avail``        zset    ids claimable now, scored by position
``Q:delayed``      zset    unclaimed messages not yet due, scored by ``d``
                           (ms; a group's head that expires first, by
                           its expiry: place() in _common.lua); members
                           ``<position, 16 digits>:<id>``, so messages due
                           together sort by position
``Q:claimed``      zset    ids under a claim, scored by claim expiry (ms)
``Q:expiry``       zset    every live id, scored by ``expires`` (ms)
``Q:seq``          string  last position handed out; kept a day when
                           the queue is deleted (and for good by the
                           first post to the queue created again), so
                           positions read before a deletion stay below
                           those of the queue created again
``Q:claims``       zset    claim ids, scored by claim expiry (ms)
``Q:outbox``       zset    ids on their way to another queue (dead letters,
                           moved groups), scored by position
``Q:groups``       zset    group ids with live messages (all score 0: lex)
``Q:deleted``      zset    ids consumers deleted (or retention removed)
                           lately, scored by deletion time (ms); kept
                           ``deleted_id_memory`` seconds so a retried post
                           or outbox copy skips them
``Q:movedout``     zset    ids that left for another queue (dead letters,
                           moved groups) lately, by when (ms): a retried
                           post skips them; forgotten with ``Q:deleted``
``Q:free``         zset    every live id not under a claim (delayed and
                           blocked group members included), by position:
                           retention's ``length`` counts these
``Q:carried``      zset    ids zaqar-delay-migrate carried in, scored by
                           their message's expiry + 1 hour (ms): a move
                           run again skips them; gc forgets expired ones
``Q:removed``      string  messages retention has removed from the queue
``Q:floor``        string  highest length cutoff found: free messages below
                           this position are beyond ``length`` for good
``Q:readfloor``    string  highest read-by-all cut applied: free messages at
                           or before it were read by every required
                           persistent consumer, gone for good
``Q:consumers``    zset    persistent consumer ids (consume_id), scored by
                           registration time (ms)
``Q:csubs``        zset    consume_ids whose ``cursor:`` subscription was
                           stored, scored by its expiry (ms) on Redis'
                           clock (the hash's PTTL)
``Q:cpins``        zset    subscribed consumers that may pin read-by-all,
                           scored by cursor (-1: none); idle ones leave it
                           when met, and come back with their next page
``Q:cseen``        zset    the same consumers, scored by last active (ms)
``Q:cindexed``     string  ``done`` once consumers registered before the
                           three indexes above were filed
``Q:cons:<cid>``   hash    one persistent consumer: ``c`` cursor, ``h`` last
                           position handed (both '' for none), ``l`` lost,
                           ``a`` last active (ms), ``r`` registered (ms)
``Q:purgescan``    hash    queue deletions resetting their consumers, a
                           batch per call: each deletion's token -> its
                           ZSCAN cursor (gone when one is done; kept an
                           hour)
``Q:notified``     zset    ids of the subscriptions that are not persistent
                           consumers', scored as in ``Q:subs``: what
                           Zaqar's notifier lists on every post
``Q:nindexed``     string  ``done`` once the subscriptions stored before
                           ``Q:notified`` existed were filed (else the
                           ZSCAN cursor of that filing)
``Q:meta``         string  a copy of the queue's metadata (JSON) from
                           Zaqar's control store, kept 60 s at most
                           (metadata.py; not with pooling)
``Q:metagen``      string  generation of that copy: bumped by every write
                           of the queue's metadata, so a copy read before
                           a write is never stored after it
``Q:r:<claim>``    string  a claim's or pop's result (MessagePack), kept
                           for the retry span so a retry returns it again
``Q:mvr:<token>``  string  the result of one group move step, the same way
``Q:pgr:<token>``  string  the result of one group purge step, the same way
``Q:upr:<token>``  string  the result of one unpin, the same way
``Q:g:<group>``    zset    a group's live message ids, by position
``Q:m:<id>``       hash    one message, fields below
``Q:c:<claim>``    hash    one claim: ``t`` ttl (s), ``e`` expiry (ms),
                           ``g`` grace (s)
``Q:cm:<claim>``   zset    ids handed out under that claim, by position
``Q:gflight``      zset    grouped ids under a claim, scored by claim expiry
                           (counts the groups in flight)
``Q:moving``       zset    groups being moved, scored by the move's last
                           step (ms): frozen, none of their members is
                           filed for claims until the move is done
``Q:movetargets``  hash    group -> the queue it is being moved to
``Q:movebatch``    hash    group -> the ids its move's last step took
                           (MessagePack): no step takes the next batch
                           while one of them is still in the outbox
``Q:outboxscan``   string  the outbox position gc's next look at it starts
                           after (kept a day; absent: from the start)
``Q:sticky``       string  the queue's sticky time (ms), stored by the last
                           claim; absent when the queue is not sticky
``Q:pin``          hash    sticky group -> the client it is pinned to
``Q:pseen``        zset    clients that claimed on a sticky queue, scored
                           by the end of their activity (last claim,
                           renewal or delete + sticky time, ms)
``Q:pg:<client>``  set     the groups pinned to a client
``Q:pa:<client>``  zset    claimable heads of those groups, by position:
                           filed here instead of ``avail``, so only that
                           client's claims see them
=================  ======  ==================================================

Only due, unclaimed messages that head their group (or have none) are in
``avail``; a claim pops from it and never sees delayed, claimed or blocked
messages, whatever their number. Scripts move ids from ``delayed`` and
``claimed`` into ``avail`` when their time has come (each id once), a
bounded batch per call inside the same script that claims (gc settles the
rest), and file a group's next member when its head leaves. A group id
enters key names only after ``Q:g:``, JSON-encoded, so it cannot reach
another key type or, behind the closed hash tag, another slot.
A client id (Zaqar's Client-ID) enters key names only after ``Q:pg:`` and
``Q:pa:``, likewise.

Sticky groups: a claim reads ``avail`` and its own client's ``Q:pa:``
together in position order, so groups pinned to other live clients cost it
nothing. A client whose activity ended is found first in ``Q:pseen``; each
claim (and stats) frees a bounded batch of its groups, moving their heads
back to ``avail``, and a pin met with an idle client is dropped on the
spot.

Message hashes carry no Redis expiry: a message must leave its group's
index when it goes, which only a script can do. Expired messages are
removed by every script that touches the queue and by ``gc``.

Retention (``zaqar_delay/retention.py``) needs no walk either: the
``length``-th newest member of ``free`` is the position below which free
messages are no longer kept (and ``floor`` remembers it, so that a
message beyond ``length`` does not come back when newer ones leave before
it was removed), and as positions and created times grow
together, the messages past ``time`` are the oldest members of ``free``
(found by bisection). Reads leave out what retention does not keep;
claims on grouped queues, stats, group listings and the cleanup script
(``clean``, run by ``gc``) remove it, oldest first and a bounded batch per
call, each removal counted once in ``removed`` in the same script.

Persistent consumers (``zaqar_delay/consumers.py``) live as long as their
``cursor:<consume_id>`` subscription: scripts look the subscription up
(``Q:subscribers``, ``Q:s:<id>``, same hash tag) and drop the state of one
that expired or was deleted. Read-by-all is a third retention setting:
messages at or before the cut are not kept unless claimed, and
``readfloor`` keeps them gone when the cut later falls (a consumer goes
idle, is removed or registers). A consumer's lag is two index counts.

Message hash fields:

=====  ===================================================================
field  meaning
=====  ===================================================================
``b``  body, JSON text
``t``  ttl, seconds (raised by claims to the claim's ttl + grace)
``cr`` created, epoch ms (Redis ``TIME``)
``e``  expires, epoch ms (created + ttl, extended by claims)
``d``  due, epoch ms (created + delay; claim expiry + redelivery delay)
``u``  client UUID of the poster (for ``echo``)
``p``  position in the queue
``cc`` claim count
``c``  claim id, or empty
``ce`` claim expiry, epoch ms, or 0
``rd`` redelivery delay (s) of the queue when it was last claimed
``g``  group id (JSON-encoded), absent for ungrouped messages
``cs`` body checksum (``MD5:<hex>``), only when ``enable_checksum`` was on
``to`` in the outbox: the queue it is bound for
``tt`` in the outbox: its ttl (s) there
``td`` in the outbox: its delay (s) there
``ob`` in the outbox: when it entered the outbox (ms)
=====  ===================================================================

Global keys: ``zd:queues`` (set of ``<project>/<queue>`` tags, for ``gc``).
"""

import functools
from urllib import parse

PREFIX = 'zd'
QUEUE_REGISTRY = PREFIX + ':queues'

# A queue's keys, each <queue prefix>:<suffix> (see lua/_common.lua).
QUEUE_KEY_SUFFIXES = ('msgs', 'avail', 'delayed', 'claimed', 'expiry', 'seq',
                      'claims', 'outbox', 'groups', 'deleted', 'free',
                      'removed', 'floor', 'readfloor', 'consumers',
                      'carried', 'movedout')


@functools.lru_cache(maxsize=10000)
def queue_tag(queue, project):
    """``<project>/<queue>``, percent-encoded: data, never syntax."""
    return '{}/{}'.format(parse.quote(project or '', safe=''),
                          parse.quote(queue, safe=''))


@functools.lru_cache(maxsize=10000)
def queue_prefix(queue, project):
    return '%s:{%s}' % (PREFIX, queue_tag(queue, project))


def queue_keys(queue, project):
    """Every key of QUEUE_KEY_SUFFIXES, in that order."""
    prefix = queue_prefix(queue, project)
    return [prefix + ':' + suffix for suffix in QUEUE_KEY_SUFFIXES]


@functools.lru_cache(maxsize=10000)
def script_keys(queue, project):
    """The KEYS of a queue script: the first queue key alone, which
    routes the call; the script builds the others (_common.lua)."""
    return (queue_prefix(queue, project) + ':' + QUEUE_KEY_SUFFIXES[0],)


def message_key(queue, project, message_id):
    return queue_prefix(queue, project) + ':m:' + message_id


def subscription_keys(queue, project):
    """(id index zset, subscriber -> id hash) of a queue's subscriptions."""
    prefix = queue_prefix(queue, project)
    return prefix + ':subs', prefix + ':subscribers'


def notified_key(queue, project):
    """Zset of the subscriptions Zaqar's notifier reaches
    (subscriptions.py)."""
    return queue_prefix(queue, project) + ':notified'


def subscription_key(queue, project, subscription_id):
    return queue_prefix(queue, project) + ':s:' + subscription_id
