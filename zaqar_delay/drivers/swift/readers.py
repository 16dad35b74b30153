"""The read-by-all cut of a queue on Swift: its live persistent consumers
and their lowest cursor (consumers.read_through_of), read with work that
does not grow with the number of consumers (SPEC §5; the bounded-work
rule).

A queue with at most ``read_cut_index_from`` consumers (an option)
answers from two listings of at most that many entries, its versions and
subscriptions, as
consumers.Consumers.all reads them. Beyond that, from an index that every
version write keeps in the subscription container (consumers.py):

``r/<cursor + 1>/<consume_id>/<seq>``  the entry of version ``seq`` of a
    consumer, written before that version (empty; its Content-Type carries
    ``a``, last active in ms); the cursor is padded like a position, 0
    before the first acknowledgement. The writer deletes the entry of the
    version it replaced with that version. So a consumer's newest version
    always has its entry, and a listing of ``r/`` is in cursor order.

``rb``  the index is complete: written (``c=1``) when a queue's first
    consumer registers. A queue whose consumers an earlier release wrote
    gets ``since=<ms>`` when it is first read by the walk; every
    consumer active after that instant has its entry, and those that were
    not are idle ``consumer_idle_time`` later: until then no read cut.

The walk lists entries from the lowest cursor. Entries idle by their own
``a`` are deleted unread: an idle consumer counts for nothing, and one
that comes back writes a new version, and with it an entry. The others
are checked, a few at a time, against the consumer's newest version and
its subscription (two listings of one entry each): the first live one's
cursor is the lowest, and the walk stops at ``need`` live ones. Entries
of replaced versions, of versions a racing writer lost and of forgotten
consumers are deleted on the way, and so are those of versions that
never came (a write that failed, PENDING_MS on); an entry of a version
not written yet (a write in flight) is passed over: the entry of the
version it replaces is still there. So is a consumer not subscribed (yet,
or any more) until it is idle. A walk that reaches its bound before it
has an answer answers "one live consumer that has read nothing", which
cuts nothing.
"""

import collections
import functools

from zaqar_delay import consumers
from zaqar_delay.drivers.swift import consumers as swift_consumers
from zaqar_delay.drivers.swift import names

# Index entries listed per page, pages per walk, and entries checked (two
# listings each) at most per round trip and per walk.
WALK_PAGE = 50
WALK_PAGES = 4
CHECKS_PER_ROUND = 4
WALK_CHECKS = 16
# An entry whose version or subscription is still missing this long after
# it was written was left by a write that failed: it is deleted.
PENDING_MS = 60 * 1000
# What a walk that cannot answer reports: no read cut.
UNKNOWN = (1, -1)

Entry = collections.namedtuple('Entry', 'name cursor consume_id seq active')
LIVE, DEAD, PENDING = 'live', 'dead', 'pending'


def _parse(entry):
    parts = entry['name'].split('/')
    if len(parts) != 4:
        return None
    try:
        return Entry(entry['name'], int(parts[1]) - 1, parts[2],
                     int(parts[3]), int(names.ct_params(
                         entry.get('content_type')).get('a', 0)))
    except ValueError:
        return None


class Readers:
    """live_readers of the queues of one consumer store."""

    def __init__(self, consumer_store, indexed_from):
        self.consumers = consumer_store
        self.store = consumer_store.store
        # Consumers (version and subscription entries) a queue may have
        # and be answered from listings of them all.
        self.indexed_from = indexed_from

    def live_readers(self, queue, project, idle_s, need):
        """(live consumers, their lowest cursor as
        consumers.lowest_cursor) for read_through_of: the count exact
        below ``need``, at least ``need`` otherwise."""
        c = swift_consumers.container(queue, project)
        most = self.indexed_from
        now, versions, subscribed = self.consumers.listed(
            queue, project, limit=most + 1)
        if len(versions) <= most and len(subscribed) <= most:
            live = [found for found in self.consumers.live(
                queue, project, versions, subscribed)
                if not found.is_idle(now, idle_s)]
            return len(live), consumers.lowest_cursor(live)
        built, page = self.store.parallel(lambda read: read(), [
            functools.partial(self.store.head, c, swift_consumers.BUILT_OBJ),
            functools.partial(self.store.listing, c,
                              swift_consumers.INDEX_PREFIX, limit=WALK_PAGE)])
        if not self._complete(c, built, now, idle_s):
            return UNKNOWN
        return _Walk(self.store, c, now, idle_s * 1000, need).run(page)

    def _complete(self, c, built, now, idle_s):
        if built is None:
            # Consumers written by an earlier release: those active from
            # now on have entries, the others are idle in idle_s.
            # If-None-Match: a HEAD that missed a complete index (a lagging
            # replica) must not mark it incomplete.
            self.store.put(c, swift_consumers.BUILT_OBJ, exclusive=True,
                           recreate=False,
                           content_type=names.content_type(since=now))
            return False
        params = names.ct_params(built.get('content-type'))
        return bool(params.get('c')) or (
            now - int(params.get('since', now)) >= idle_s * 1000)


class _Walk:

    def __init__(self, store, c, now, idle_ms, need):
        self.store, self.c, self.now = store, c, now
        self.idle_ms, self.need = idle_ms, need
        self.found, self.lowest, self.checks = 0, None, 0
        self.doomed = []

    def run(self, page):
        try:
            return self._walk(page)
        finally:
            self.store.delete_many(self.c, self.doomed)

    def _walk(self, page):
        for turn in range(WALK_PAGES):
            entries = [e for e in map(_parse, page) if e is not None]
            waiting = []
            for entry in entries:
                if self.now - entry.active >= self.idle_ms:
                    self.doomed.append(entry.name)
                else:
                    waiting.append(entry)
            while waiting:
                if self.checks >= WALK_CHECKS:
                    return UNKNOWN
                # First as many as are needed (the lowest usually are
                # live), then more at a time.
                size = CHECKS_PER_ROUND if self.checks else min(
                    CHECKS_PER_ROUND, self.need)
                batch, waiting = waiting[:size], waiting[size:]
                if self._check(batch):
                    return self.found, self.lowest
            if len(page) < WALK_PAGE:
                # The whole index is read: the count is exact.
                return self.found, self.lowest
            if turn + 1 < WALK_PAGES:
                page = self.store.listing(
                    self.c, swift_consumers.INDEX_PREFIX,
                    marker=page[-1]['name'], limit=WALK_PAGE)
        return UNKNOWN

    def _check(self, batch):
        """Check ``batch`` (in cursor order); True once ``need`` live
        consumers are found."""
        self.checks += len(batch)
        reads = []
        for entry in batch:
            reads += [
                functools.partial(self.store.listing, self.c,
                                  'v/{}/'.format(entry.consume_id),
                                  limit=1, reverse=True),
                functools.partial(self.store.listing, self.c,
                                  _subscriber(entry.consume_id), limit=1)]
        found = self.store.parallel(lambda read: read(), reads)
        for index, entry in enumerate(batch):
            verdict = self._verdict(entry, found[2 * index],
                                    found[2 * index + 1])
            if verdict == DEAD:
                self.doomed.append(entry.name)
            elif verdict == LIVE:
                self.found += 1
                if self.lowest is None:
                    self.lowest = entry.cursor
                if self.found >= self.need:
                    return True
        return False

    def _verdict(self, entry, versions, subscribed):
        seq, params = (swift_consumers.parse_version(versions[0])[1:]
                       if versions else (0, None))
        if seq > entry.seq:
            return DEAD       # its version was replaced
        late = self.now - entry.active > PENDING_MS
        if seq < entry.seq:
            return DEAD if late else PENDING
        if swift_consumers.entry_of_version(
                entry.consume_id, seq, params) != entry.name:
            return DEAD       # a tombstone, or a racing writer's loss
        if self.now - int(params.get('a', 0)) >= self.idle_ms:
            return DEAD
        name = _subscriber(entry.consume_id)
        if not any(s['name'] == name and swift_consumers.unexpired(s)
                   for s in subscribed):
            # Not subscribed yet, or no more. Left to go idle rather than
            # deleted: a listing that lags would make a live consumer's
            # entry go, and the consumer with it until it reads again.
            return PENDING
        return LIVE


def _subscriber(consume_id):
    return names.subscriber_obj(consumers.PREFIX + consume_id)
