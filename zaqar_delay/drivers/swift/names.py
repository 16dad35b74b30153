"""Every Swift container and object name zaqar-delay writes.

One container per queue and kind, in the driver's Swift account::

    zd:m:<project>:<queue>     messages, claims and their indexes
    zd:s:<project>:<queue>     notification subscriptions

``<project>`` and ``<queue>`` are percent-encoded with no safe characters,
so neither can contain ``:`` or ``/``: no name can forge another tenant's
container. A project whose encoded container name would pass Swift's
256-byte limit is written ``#<sha256 hex>`` instead (``#`` never appears in
an encoded name, so the two forms cannot collide); the real names are kept
as container metadata for ``gc``.

Objects of a message container (``P`` = position, 20 digits; ``T`` = epoch
ms, 15 digits; ``K`` = attempt number, 1 for the first claim; ``I`` = the
percent-encoded message id):

=========================  ==================================================
object                     holds
=========================  ==================================================
``p/P``                    position P is taken. Created with If-None-Match,
                           which is how positions are allocated. Its
                           Content-Type carries ``id cr e d u`` (below), so
                           a listing of ``p/`` answers stats without GETs.
                           No X-Delete-At: readers go by ``e``, and gc
                           removes expired messages.
``m/I``                    the message: body and fields below (JSON);
                           created with If-None-Match (ids are unique, a
                           retried post cannot duplicate). Metadata ``e``.
                           No X-Delete-At: gc removes one that no
                           position names (strays.py).
``a/P/I/K``                attempt K of the message is claimable now.
``d/T/P/I/K``              attempt K becomes claimable at T (delay, or
                           redelivery delay after a claim ended).
``l/I/K``                  attempt K was won: created with If-None-Match,
                           so one claimer (or pop, or dead-lettering) wins
                           it. Content-Type carries ``c`` (claim id, or
                           ``pop``/``dead``/``move``/``ret``; a move adds
                           ``t``, the target queue, a pop ``o``, its pop
                           id). The latest K is the claim
                           count; its claim id is the message's claim.
                           A claim's lock also carries ``e`` (the
                           claim's expiry; never later than the
                           record's: only a shortening renewal
                           changes it, lowering it first; a release
                           drops it first), ``p``
                           and ``g`` (the message's position and group
                           key), so its claimer's delete reads no
                           record. Locks without ``e`` (written before
                           2026-12-06) send it to the record.
``c/<claim id>``           a claim: ttl, grace, expiry, redelivery delay and
                           its members (JSON: id, position, attempt, group
                           key or null). Written before the locks.
``R/<claim id>``           the claim was released: written before the
                           release touches anything, kept (X-Delete-At)
                           until the claim would have ended, so that a
                           shortening renewal crossing the release, which
                           writes the record again, undoes what it wrote
                           (claims.py, _unless_rewritten).
``x/T/<claim id>``         a claim expiring at T: the index claims read to
                           redeliver expired claims. Content-Type ``m``:
                           the record's members as JSON [[id, position],
                           ...] (up to HINT_MEMBERS), what retention's
                           cut reads instead of the record.
``g/G/P/I``                message I (position P) belongs to group G (the
                           group key, below); listing ``g/G/`` gives the
                           members in order, its first entry is the head.
                           Content-Type carries ``d`` (due) and ``g`` (the
                           JSON-encoded group id).
``n/T/I``                  retention removed message I, its ``ret`` lock
                           won at T; written after the lock and before the
                           removal, so each removal is one object, whoever
                           finishes it. Counted by stats (retention.py).
``t/S``                    folded retention count number S: Content-Type
                           ``n`` (removals) and ``upto`` (the last ``n/``
                           name it covers); the newest one wins.
``k/P``                    a length cut some operation saw: messages not
                           in flight below the highest P stay gone, even
                           when the newer ones that pushed them out leave.
``r/I``                    message I arrived here as a copy (dead letter,
                           moved group); kept RECEIVED_MEMORY_S past its
                           expiry, so gc finishing that move again skips
                           it even after its consumer deleted it.
``o/<pop id>``             the outcome of one pop: Content-Type ``s=done``
                           (created by the pop before it answers: it hands
                           out its messages) or ``s=released`` (created by
                           gc for a pop that never got that far: its
                           messages are claimable again). Created with
                           If-None-Match, so the pop and gc agree on one.
                           Pop locks name their pop (``o`` in their
                           Content-Type).
``k/P`` (read-by-all)      also the cut past what every required persistent
                           consumer read (consumers.py), so it stays gone.
``w/P``                    a message at position P was removed while the
                           queue had persistent consumers: their ``lost``
                           (consumers.py).
``P/G``                    sticky group G is pinned (pins.py): Content-Type
                           ``cl`` (client key U), ``id`` (the client's
                           id), ``t`` (ms pinned).
``Q/U/G``                  client U holds group G's pin: what an idle
                           sweep of U lists.
``C/U``                    client U's activity on the queue: Content-Type
                           ``a`` (last ms), ``u`` (active until, ms),
                           ``st`` (sticky ms), ``id``.
``K/T/U``                  client U's activity ends at T: listing ``K/``
                           up to now finds idle clients (as ``x/`` finds
                           ended claims); an entry whose ``C/U`` is gone
                           or says U is active again is stale.
``A/U/P/I/K``              attempt K of a head whose group is pinned to
                           U, claimable now: filed here instead of
                           ``a/``, so only U's claims list it.
``z/gc``                   what gc's last deep pass saw: Content-Type ``p``
                           (the highest position it listed) and ``next``
                           (ms: when something it saw falls due), so a
                           pass with nothing due lists little
                           (summary.py); ``sw`` (ms: when a deep pass
                           last swept the strays, strays.py).
``h/P``                    a persistent consumer's page reached position
                           P (a fence): written before the page looks for
                           posts in flight below it, read by every post
                           after its positions' PUTs; a post with a
                           position at or below the highest moves after it
                           (fences.py). Only the highest one matters:
                           each page deletes the one it started from,
                           gc's sweep the others.
``y/P``                    one insert carried messages in (zaqar-delay-
                           migrate) at positions P to Content-Type
                           ``last``, keeping their age: ``cr`` is the
                           oldest one's. Where retention's cleanup looks
                           for those past ``time`` above the cut
                           (carried.py).
=========================  ==================================================

Persistent consumer state is ``v/<consume_id>/<seq>`` in the subscription
container (consumers.py).

Sticky objects are the upper-case prefixes but ``R/``. Client keys
``U`` are made like group keys from the client id (first 64 bytes), so a
client id is data too: ``[0-9a-f.]``, at most 149 characters.

Group keys ``G``: the hex digits of the UTF-8 JSON-encoded group id (its
first 256 bytes), ``.``, and 20 hex digits of its SHA-256. A group id is
data: ``$``, ``/``, ``:``, unicode and 256-character ids all become
``[0-9a-f.]``, at most 533 characters, so no object name can be bent by
one. Hex keeps byte order, so listing ``g/`` lists groups in the order of
their encoded ids (ids sharing their first 256 bytes follow their hashes).
Entries of grouped messages under ``a/``, ``d/`` and ``p/`` carry ``g=G``
in their Content-Type, so a claim knows a candidate's group, and stats
count groups, from listings alone. Those entries also carry ``u`` (the
poster's client UUID) where the filer knows it, so a listing without
echo skips the listing client's own messages unread (scan.py).

Message fields (``m/I`` body, and ``p/P`` Content-Type parameters):

=====  ===================================================================
field  meaning
=====  ===================================================================
``b``  body (JSON value)
``t``  ttl, seconds (object metadata ``T`` overrides it once a claim's
       ttl + grace outgrew it, as Zaqar's drivers show claimed messages)
``cr`` created, epoch ms (the API node's clock: Swift offers none)
``e``  expires, epoch ms (created + ttl, extended by claims; object
       metadata, updated by POST, which cannot resurrect a deleted object)
``d``  due, epoch ms (created + delay)
``u``  client UUID of the poster (for ``echo``)
``p``  position
``g``  group id (JSON-encoded), or null (its key G in ``p/``)
``cs`` body checksum (``MD5:<hex>``), only when ``enable_checksum`` was on
=====  ===================================================================
"""

import hashlib
import json
from urllib import parse

PREFIX = 'zd'
MESSAGES = 'm'
SUBSCRIPTIONS = 's'
MAX_CONTAINER_BYTES = 256
CONTENT_TYPE = 'application/x-zaqar-delay'
POS_DIGITS = 20
TIME_DIGITS = 15
# Claims on a "pop" or dead-lettering attempt carry these instead of an id.
POP = 'pop'
DEAD = 'dead'
MOVE = 'move'
# Retention removing a message that it no longer keeps (retention.py).
RETAIN = 'ret'
# Not a claim id: a lock held by pop, dead-lettering, a group move or a
# retention removal.
TAKEN = (POP, DEAD, MOVE, RETAIN)
# Outcomes of a pop (o/ objects).
DONE = 'done'
RELEASED = 'released'
# How long past a copied message's expiry its r/ marker stays.
RECEIVED_MEMORY_S = 900
# A message posted at epoch ms T takes a position of at least
# T * POS_PER_MS (messages.py), which retention's age cut relies on.
POS_PER_MS = 1000
# gc's per-queue summary (summary.py).
GC_SUMMARY = 'z/gc'
# The layout version of the account (layout.py): one JSON object
# {"v": version} in a container no queue prefix lists.
LAYOUT_CONTAINER = PREFIX + ':layout'
LAYOUT_OBJ = 'version'
GROUP_HEX_BYTES = 256
GROUP_HASH_CHARS = 20
CLIENT_HEX_BYTES = 64


def enc(value):
    """Percent-encode a name part: data, never syntax."""
    return parse.quote(value or '', safe='')


def container(kind, queue, project):
    project_part = enc(project)
    name = ':'.join((PREFIX, kind, project_part, enc(queue)))
    if len(name.encode()) > MAX_CONTAINER_BYTES:
        project_part = '#' + hashlib.sha256(
            (project or '').encode()).hexdigest()
        name = ':'.join((PREFIX, kind, project_part, enc(queue)))
    return name


def container_prefix(kind):
    return '%s:%s:' % (PREFIX, kind)


def pos(position):
    return '%0*d' % (POS_DIGITS, position)


def ms(epoch_ms):
    return '%0*d' % (TIME_DIGITS, max(0, int(epoch_ms)))


def position_obj(position):
    return 'p/' + pos(position)


def message_obj(message_id):
    return 'm/' + enc(message_id)


def parse_message_obj(name):
    return parse.unquote(name[len('m/'):])


def received_obj(message_id):
    return 'r/' + enc(message_id)


def avail_obj(position, message_id, attempt):
    return 'a/%s/%s/%d' % (pos(position), enc(message_id), attempt)


def delayed_obj(due_ms, position, message_id, attempt):
    return 'd/%s/%s/%s/%d' % (ms(due_ms), pos(position), enc(message_id),
                              attempt)


def outcome_obj(pop_id):
    return 'o/' + enc(pop_id)


def lock_prefix(message_id):
    return 'l/%s/' % enc(message_id)


def lock_obj(message_id, attempt):
    return lock_prefix(message_id) + str(attempt)


def claim_obj(claim_id):
    return 'c/' + enc(claim_id)


def released_obj(claim_id):
    return 'R/' + enc(claim_id)


def expiry_obj(expires_ms, claim_id):
    return 'x/%s/%s' % (ms(expires_ms), enc(claim_id))


# Members an x/ hint names: a claim of more names none, and the retention
# cut reads its record (Zaqar bounds a claim by 20 unless told otherwise;
# 50 members keep the Content-Type under 4 KiB).
HINT_MEMBERS = 50


def hint_type(record):
    """Content-Type of a claim's ``x/`` hint: the ids and positions of the
    members its ``record`` names, or None past HINT_MEMBERS."""
    if len(record['m']) > HINT_MEMBERS:
        return None
    return content_type(m=json.dumps([[m[0], m[1]] for m in record['m']],
                                     separators=(',', ':')))


def hint_members(entry):
    """{id: position} an ``x/`` listing entry names, None if it names none
    (a large claim, or one written by an earlier release)."""
    raw = ct_params(entry.get('content_type')).get('m')
    return None if raw is None else {mid: pos for mid, pos in json.loads(raw)}


def _hex_key(text, hex_bytes):
    raw = text.encode('utf-8')
    return '%s.%s' % (raw[:hex_bytes].hex(),
                      hashlib.sha256(raw).hexdigest()[:GROUP_HASH_CHARS])


def group_key(encoded):
    """The name part of a JSON-encoded group id (see the table above)."""
    return _hex_key(encoded, GROUP_HEX_BYTES)


def client_key(client):
    """The name part of a sticky client id (see the table above)."""
    return _hex_key(client, CLIENT_HEX_BYTES)


def pin_obj(gk):
    return 'P/' + gk


def held_prefix(ck):
    return 'Q/%s/' % ck


def held_obj(ck, gk):
    return held_prefix(ck) + gk


def activity_obj(ck):
    return 'C/' + ck


def activity_end_obj(until_ms, ck):
    return 'K/%s/%s' % (ms(until_ms), ck)


def parse_activity_end(name):
    """(until ms, client key) of a ``K/`` entry."""
    _, until, ck = name.split('/')
    return int(until), ck


def pinned_prefix(ck, position=None, message_id=None):
    """``A/<ck>/``, or the prefix of one message's attempts there."""
    if position is None:
        return 'A/%s/' % ck
    return 'A/%s/%s/%s/' % (ck, pos(position), enc(message_id))


def pinned_obj(ck, position, message_id, attempt):
    return '%s%d' % (pinned_prefix(ck, position, message_id), attempt)


def group_prefix(gk):
    return 'g/%s/' % gk


def group_obj(gk, position, message_id):
    return '%s%s/%s' % (group_prefix(gk), pos(position), enc(message_id))


def after_group(gk):
    """A listing marker past every entry of group ``gk``."""
    return group_prefix(gk) + '~'


def parse_group_entry(name):
    """(group key, position, message id) of a ``g/`` entry."""
    _, gk, position, message_id = name.split('/')
    return gk, int(position), parse.unquote(message_id)


def tally_obj(locked_ms, message_id):
    """One retention removal: named by its lock's time and the id, so
    every node finishing that removal writes the same object."""
    return 'n/%s/%s' % (ms(locked_ms), enc(message_id))


def cut_obj(position):
    """A retention length cut an operation saw (retention.py)."""
    return 'k/' + pos(position)


def total_obj(seq):
    """A folded retention count (``n`` removals up to tally ``upto``)."""
    return 't/' + pos(seq)


def carried_obj(first_position):
    """Messages one insert carried in, from ``first_position`` on."""
    return 'y/' + pos(first_position)


def subscription_obj(subscription_id, consumer=False):
    """``s/<id>``; ``c/<id>`` for a persistent consumer's, which Zaqar's
    notifier does not list (subscriptions.py)."""
    return ('c/' if consumer else 's/') + enc(subscription_id)


def subscriber_obj(subscriber):
    return 'u/' + enc(subscriber)


# -- parsing listing entries ----------------------------------------------

def parse_entry(name):
    """(position, message id, attempt) of an ``a/``, ``A/`` or ``d/``
    entry, with the due time (ms) for ``d/`` entries: (due, position, id,
    attempt)."""
    parts = name.split('/')
    if parts[0] == 'A':
        parts = parts[:1] + parts[2:]
    if parts[0] in 'aA':
        return int(parts[1]), parse.unquote(parts[2]), int(parts[3])
    return (int(parts[1]), int(parts[2]), parse.unquote(parts[3]),
            int(parts[4]))


def parse_expiry(name):
    _, expires, claim_id = name.split('/')
    return int(expires), parse.unquote(claim_id)


def parse_lock(name):
    _, message_id, attempt = name.split('/')
    return parse.unquote(message_id), int(attempt)


def parse_subscription(name):
    return parse.unquote(name[2:])


def content_type(**params):
    """A Content-Type whose parameters carry small fields (listed by
    container listings, so indexes need no GET); None values are left
    out."""
    return CONTENT_TYPE + ''.join(
        ';%s=%s' % (key, enc(str(value))) for key, value in params.items()
        if value is not None)


def claim_lock_type(claim_id, expires_ms, position, gk):
    """Content-Type of a claim's lock (``l/``): ``expires_ms`` None
    drops its expiry (a release), which sends readers to the record."""
    return content_type(c=claim_id, e=expires_ms, p=position, g=gk)


def position_fields(entry):
    """The fields a ``p/`` listing entry carries, or None if it is not one
    of ours (then it is skipped, never trusted). ``w``: when it was
    written (ms, the writer's clock), which is ``cr`` for a post's message
    but not for a copy (dead letter, moved group, migration), which keeps
    its age: how long a writer may still be at work on it goes by
    ``w``."""
    fields = ct_params(entry.get('content_type'))
    fields.setdefault('g', None)
    try:
        fields.update(e=int(fields['e']), d=int(fields['d']),
                      cr=int(fields['cr']), pos=int(entry['name'][2:]))
    except (KeyError, ValueError):
        return None
    written = fields.get('w', '')
    fields['w'] = int(written) if written.isdigit() else fields['cr']
    return fields if fields.get('id') else None


def ct_params(value):
    out = {}
    for part in (value or '').split(';')[1:]:
        key, _, raw = part.strip().partition('=')
        out[key] = parse.unquote(raw)
    return out
