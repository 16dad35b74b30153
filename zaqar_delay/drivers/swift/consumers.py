"""Persistent consumers on Swift (zaqar_delay/consumers.py, SPEC §5).

A consumer's state lives in its queue's subscription container
(``zd:s:<project>:<queue>``, subscriptions.py) as a chain of versions:

``v/<consume_id>/<seq>``  version ``seq`` (20 digits) of the state, empty;
                          its Content-Type carries ``cur`` (cursor),
                          ``h`` (last position handed), ``lost`` and ``a``
                          (last active, ms), or ``gone=1`` for a
                          tombstone. Created with If-None-Match and
                          read-back (connection.Store.create), so of two
                          writers of one version only one wins: the loser
                          reads the newest version again and reapplies its
                          forward-only change. The winner deletes the
                          version it replaced.

``w/<position>``          (queue's message container) a message that was
                          at this position was removed (deleted, claimed
                          and deleted, popped, removed by retention or
                          TTL): written by state.QueueState.remove only
                          while the queue has consumers, kept
                          GONE_MEMORY_S. Positions are sparse (ms *
                          POS_PER_MS + n), so a consumer's ``lost`` counts
                          these markers, not the gap between positions.

``r/<cursor + 1>/<consume_id>/<seq>``  the entry of version ``seq`` in
                          the cursor index, written before the version
                          and deleted with it; ``rb`` says the index is
                          complete (readers.py, which reads them).

So one container listing of ``v/`` answers ``_consumers`` with no GET,
and an update is atomic without locks. Forgetting writes a tombstone
version (expiring after TOMBSTONE_S): an update that read the version
before it loses the race for the next one and then finds the tombstone,
so a forgotten consumer stays forgotten; registering again writes a fresh
version after it.

A consumer lives as long as its subscription: the ``u/cursor:<id>`` entry
of the subscription carries the subscription's expiry (``e``, seconds) in
its Content-Type, read by the same round trip, so an expired subscription
stops counting at once (Swift deletes both by X-Delete-At later).
"""

import dataclasses
import functools
import time

from zaqar_delay import consumers
from zaqar_delay.drivers.swift import names

# How long a tombstone outlives the forget: longer than any update can
# stay between reading a version and writing the next.
TOMBSTONE_S = 3600
# Versions written in a row before an update gives up (one per writer
# racing it; a consumer has one reader, so races are rare).
ATTEMPTS = 20
# How long a removed position is remembered for ``lost``: a consumer away
# longer than this undercounts what it lost meanwhile.
GONE_MEMORY_S = 7 * 86400
# The cursor index (readers.py).
INDEX_PREFIX = 'r/'
BUILT_OBJ = 'rb'


def container(queue, project):
    return names.container(names.SUBSCRIPTIONS, queue, project)


def _version_obj(consume_id, seq):
    return 'v/{}/{}'.format(consume_id, names.pos(seq))


def _position(value):
    return None if value in (None, '') else int(value)


def entry_obj(cursor, consume_id, seq):
    """The index entry of version ``seq`` of ``consume_id`` (cursor None:
    nothing acknowledged yet)."""
    return '{}{}/{}/{}'.format(INDEX_PREFIX, names.pos(
        0 if cursor is None else int(cursor) + 1), consume_id,
        names.pos(seq))


def entry_type(active_ms):
    """An index entry's Content-Type: when its consumer was active."""
    return names.content_type(a=active_ms)


def entry_of_version(consume_id, seq, params):
    """The index entry a version (``params`` its fields) was written
    with, None for a tombstone (written with none)."""
    if params is None or params.get('gone'):
        return None
    return entry_obj(_position(params.get('cur')), consume_id, seq)


def parse_version(entry):
    """(consume_id, seq, params) of a ``v/`` listing entry."""
    _, consume_id, seq = entry['name'].split('/')
    return consume_id, int(seq), names.ct_params(entry.get('content_type'))


def _state(consume_id, params, gone=None):
    return Consumer(
        consume_id=consume_id, cursor=_position(params.get('cur')),
        handed=_position(params.get('h')), lost=int(params.get('lost', 0)),
        last_active_ms=int(params.get('a', 0)), gone=gone)


@dataclasses.dataclass(frozen=True)
class Consumer(consumers.Consumer):
    """A consumer whose lost positions are the ``w/`` markers between the
    last one it saw and the first of its page (``gone(low, high)``)."""

    gone: object = dataclasses.field(default=None, compare=False,
                                     repr=False)

    def skipped(self, start, first):
        gap = self.gap(start, first)
        if gap is None or self.gone is None:
            return 0
        return self.gone(*gap)


def gone_obj(position):
    return 'w/' + names.pos(position)


def any_consumer(qs):
    """True if the queue of ``qs`` has a persistent consumer: one
    listing."""
    meta = qs.meta or {}
    return 'queue' in meta and bool(qs.store.listing(
        container(meta['queue'], meta['project']), 'v/', limit=1))


def mark_gone(qs, positions):
    """Before removing messages from the queue of ``qs``: remember their
    positions for its consumers' ``lost``. Nothing written when the queue
    has no consumer (QueueState.has_consumers)."""
    if not positions or not qs.has_consumers():
        return
    headers = {'X-Delete-At': str(int(time.time()) + GONE_MEMORY_S)}
    qs.store.parallel(lambda pos: qs.store.put(qs.c, gone_obj(pos),
                                               headers=headers), positions)


def count_gone(store, c, low, high):
    """How many positions strictly between ``low`` and ``high`` lost their
    message for a consumer whose page from ``low`` began at ``high``: the
    removed ones (``w/``) and those still stored that the page passed over
    (no longer kept by retention, expired). One listing request per 10,000
    of each."""
    removed, stored = store.parallel(lambda prefix: store.listing_all(
        c, prefix, marker=prefix + names.pos(low),
        end_marker=prefix + names.pos(high)), ['w/', 'p/'])
    return len({e['name'][2:] for e in removed + stored})


class Consumers:
    """The six consumer primitives of one driver's message controller."""

    def __init__(self, driver):
        self.driver = driver
        self.store = driver.store

    def _versions(self, c, consume_id):
        """(seq, params) of the newest version ((0, None) if none), and
        the names of older ones left behind: a write whose delete of the
        version it replaced failed (the call answered 503, and its retry
        may find nothing to change). Once a tombstone above one expires,
        the older state would be the newest again."""
        found = self.store.listing(c, 'v/{}/'.format(consume_id),
                                   limit=ATTEMPTS, reverse=True)
        if not found:
            return 0, None, []
        _, seq, params = parse_version(found[0])
        return seq, params, [(entry['name'], parse_version(entry)[2])
                             for entry in found[1:]]

    def _drop(self, c, consume_id, versions):
        """Delete ``versions`` ((name, params) pairs) with their index
        entries."""
        doomed = []
        for name, params in versions:
            doomed.append(name)
            entry = entry_of_version(consume_id, int(name.split('/')[2]),
                                     params)
            if entry is not None:
                doomed.append(entry)
        self.store.delete_many(c, doomed)

    def _write(self, c, consume_id, change):
        """Write the version after the newest one, ``change(params)``
        giving its parameters (None: write nothing); retried on a lost
        race. Older versions go (those left behind too). Returns True
        when a version was written."""
        lost = None     # (seq, entry) of a version a rival won first
        for _ in range(ATTEMPTS):
            seq, params, older = self._versions(c, consume_id)
            if lost is not None and (seq > lost[0] or (
                    seq == lost[0] and lost[1] != entry_of_version(
                        consume_id, seq, params))):
                # Our entry for it, unless the rival's has the same name
                # (the same cursor) and its version is still the newest.
                # A listing that does not show the rival's yet decides
                # nothing.
                self.store.delete(c, lost[1])
            lost = None
            wanted = change(params)
            if wanted is None:
                if older:
                    self._drop(c, consume_id, older)
                return False
            headers = None
            if wanted.get('gone'):
                headers = {'X-Delete-At': str(int(time.time())
                                              + TOMBSTONE_S)}
            else:
                # Before the version: the newest one always has its entry.
                entry = entry_obj(wanted.get('cur'), consume_id, seq + 1)
                self.store.put(c, entry, content_type=entry_type(
                    wanted['a']), recreate=True)
                lost = (seq + 1, entry)
            if self.store.create(c, _version_obj(consume_id, seq + 1),
                                 content_type=names.content_type(**wanted),
                                 headers=headers, recreate=True):
                if seq:
                    self._drop(c, consume_id, older + [
                        (_version_obj(consume_id, seq), params)])
                return True
        raise RuntimeError('consumer {} in {}: {} writers raced'.format(
            consume_id, c, ATTEMPTS))

    def _gone(self, queue, project):
        c = names.container(names.MESSAGES, queue, project)
        return lambda low, high: count_gone(self.store, c, low, high)

    def one(self, queue, project, consume_id):
        """(now ms, the live consumer or None): one round trip of two
        listings of at most one entry each, whatever the number of the
        queue's consumers (every listing with a Client-ID asks)."""
        c = container(queue, project)
        subscriber = names.subscriber_obj(consumers.PREFIX + consume_id)
        versions, subscribed = self.store.parallel(lambda read: read(), [
            lambda: self.store.listing(c, 'v/{}/'.format(consume_id),
                                       limit=1, reverse=True),
            lambda: self.store.listing(c, subscriber, limit=1)])
        subscribed = [e for e in subscribed if e['name'] == subscriber]
        found = [state for state in self.live(queue, project, versions,
                                              subscribed)
                 if state.consume_id == consume_id]
        return self.driver.now_ms(), (found[0] if found else None)

    def all(self, queue, project):
        """(now ms, live consumers): one round trip of two listings of
        every consumer."""
        now, versions, subscribed = self.listed(queue, project)
        return now, self.live(queue, project, versions, subscribed)

    def listed(self, queue, project, limit=None):
        """(now ms, ``v/`` entries, ``u/cursor:`` entries), up to
        ``limit`` of each (None: all): one round trip."""
        c = container(queue, project)
        versions, subscribed = self.store.parallel(lambda read: read(), [
            functools.partial(self.store.listing_all, c, 'v/', cap=limit),
            functools.partial(self.store.listing_all, c,
                              names.subscriber_obj(consumers.PREFIX),
                              cap=limit)])
        return self.driver.now_ms(), versions, subscribed

    def live(self, queue, project, versions, subscribed):
        """The consumers of ``versions`` with a live subscription in
        ``subscribed`` (listing entries), idle ones included."""
        live = {names.parse_subscription(entry['name'])[
            len(consumers.PREFIX):] for entry in subscribed
            if unexpired(entry)}
        newest = {}
        for entry in versions:
            consume_id, seq, params = parse_version(entry)
            if seq > newest.get(consume_id, (0, None))[0]:
                newest[consume_id] = (seq, params)
        gone = self._gone(queue, project)
        return [_state(cid, params, gone)
                for cid, (_, params) in sorted(newest.items())
                if cid in live and not params.get('gone')]

    def register(self, queue, project, consume_id):
        now = self.driver.now_ms()
        c = container(queue, project)
        # A subscription whose ttl ran out leaves its consumer's versions
        # (expiry writes no tombstone): subscribed again, it starts afresh
        # unless its subscription is still live (a create retried, or a
        # second create of a live subscriber, keeps the state).
        subscribed, anyone = self.store.parallel(lambda read: read(), [
            functools.partial(self._subscribed, c, consume_id),
            functools.partial(self.store.listing, c, 'v/', limit=1)])
        if not anyone:
            # The queue's first consumer: every one has its index entry.
            self.store.put(c, BUILT_OBJ, recreate=True,
                           content_type=names.content_type(c=1))

        def fresh(params):
            if params is not None and not params.get('gone'):
                state = _state(consume_id, params)
                untouched = (state.cursor is None and state.handed is None
                             and not state.lost)
                if subscribed or untouched:
                    return None
            return {'lost': 0, 'a': now}

        self._write(c, consume_id, fresh)

    def _subscribed(self, c, consume_id):
        """Whether ``cursor:<consume_id>`` has a live subscription (its
        ``u/`` entry, by the wall clock as subscriptions.py): one listing
        of one entry."""
        name = names.subscriber_obj(consumers.PREFIX + consume_id)
        found = self.store.listing(c, name, limit=1)
        return bool(found) and found[0]['name'] == name and unexpired(
            found[0])

    def forget(self, queue, project, consume_id):
        def tombstone(params):
            if params is None or params.get('gone'):
                return None
            return {'gone': 1}

        self._write(container(queue, project), consume_id, tombstone)

    def update(self, queue, project, consume_id, ack, handed, lost):
        now = self.driver.now_ms()

        def forward(params):
            if params is None or params.get('gone'):
                return None
            state = _state(consume_id, params)
            # A page handed again (two requests of one page at once, or a
            # retry) counts its gap once: only a page past the last one
            # handed adds what it lost, as on Redis.
            onward = (handed is None or state.handed is None
                      or handed > state.handed)
            return {'cur': _max(state.cursor, ack),
                    'h': _max(state.handed, handed),
                    'lost': state.lost + (lost if onward else 0),
                    'a': max(now, state.last_active_ms)}

        self._write(container(queue, project), consume_id, forward)


def _max(stored, new):
    if new is None:
        return stored
    return new if stored is None else max(stored, new)


def unexpired(entry):
    """Whether a ``u/`` subscription entry is live: subscriptions expire
    by the wall clock, as subscriptions.py."""
    expires = names.ct_params(entry.get('content_type')).get('e')
    return expires is None or int(expires) > int(time.time())
