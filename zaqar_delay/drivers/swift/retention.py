"""Retention on Swift (SPEC §5; the rules: zaqar_delay/retention.py).

**What a queue keeps** is read once per operation as one position, the
*cut* (:class:`Horizon`): a message that is not under a live claim is
kept when its position is at least the cut and, where a reader has its
``cr``, it is younger than ``time``.

* ``time``: a message posted at ``cr`` ms has a position of at least
  ``cr * POS_PER_MS`` (messages.py), so every position below
  ``(now - time + 1 ms) * POS_PER_MS`` is past ``time``: no request.
* ``length``: a reverse listing of ``p/`` (its Content-Type carries
  ``id cr e``) from the newest message, skipping expired ones and the
  members of live claims (``x/`` after now, one GET per live claim),
  stops at the ``length``-th; its position is the cut. It reads about
  ``length`` + (messages in flight) entries: it grows with the setting,
  never with the backlog behind it.
* What length dropped stays gone, even when the newer messages that
  pushed it out leave (claimed, deleted, expired): an operation that
  sees a length cut above the highest stored one stores it
  (``PUT k/<cut>``, read in the same round trip), and the cut is never
  below the highest ``k/``. Deletes store theirs before deleting. gc
  keeps the highest ``k/`` only. A message under a live claim is not
  judged; once its claim ends it is, against that cut too.

Claims and default listings start their ``a/`` listing at the cut, so the
messages retention dropped cost them nothing. Positions of posts that
cross on several API nodes can be out of creation order by the nodes'
clock skew, and a message carried in from another store keeps its age
at a new position (carried.py): every reader checks the age from ``cr``
too (claims and pops on the message they read to confirm a lock: one
past ``time`` is removed, never handed out).

**Removal** (:func:`drop`: the cleanup daemon, and claims for dropped
group heads so their groups move on; :func:`take_over`: a claim or pop
that locked a message past ``time``), per message, in parallel:

1. its latest lock: a live claim keeps it; a pop, dead-letter or move
   lock leaves it to that operation; a ``ret`` lock older than
   FINISH_AFTER_S is finished (steps 3-4) with that lock's time;
2. ``HEAD m/`` (a message whose post is still running is left alone),
   then ``l/<id>/<k+1>`` created with ``c=ret;t=<now>`` (If-None-Match
   and read-back, as a claim): a claim and a removal, or two removals,
   never both win a message;
3. ``PUT n/<t>/<id>``, the tally: one object per removal whoever writes
   it, so the count is exact with several cleaners and finishers;
4. the message's objects are deleted and its group advanced
   (``state.remove``); the ``ret`` lock stays until X-Delete-At as a
   tombstone: an entry filed again for that attempt (a retried index
   PUT, a late settle) loses to it and is dropped.

**The count** (stats ``removed``) is the newest fold ``t/`` plus the
tallies after it (``n/``, in name order).
"""

from zaqar_delay import consumers
from zaqar_delay import retention as retention_rules
from zaqar_delay.drivers.swift import carried
from zaqar_delay.drivers.swift import connection
from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import summary

# A "ret" lock this old whose message is still there lost its remover:
# anyone meeting it finishes the removal. Younger, the lock may still be
# a PUT racing the winner's (connection.Store.create).
FINISH_AFTER_S = 10
# Tallies are folded into a total once there are FOLD_AT older than
# FOLD_AGE_S: by then every removal that old was finished and tallied
# (gc finishes abandoned ones after 60 s), so no tally lands behind a fold.
FOLD_AT = 1000
FOLD_AGE_S = 300
# Entries listed past ``length`` in the first page, for messages in flight.
SLACK = 16
# Listing pages a cleanup step reads below the cut, passing over claimed
# messages, before it answers with what it found (and "more").
DROPPED_PAGES = 10


class Horizon:
    """What retention keeps of one queue at one instant."""

    __slots__ = ('cut', 'born_after', 'in_flight')

    def __init__(self, cut=0, born_after=None, in_flight=None):
        # Messages not in flight below this position are not kept.
        self.cut = cut
        # Kept by time iff created (ms) > born_after; None: no limit.
        self.born_after = born_after
        # {id: position} of the members of live claims (when computed).
        self.in_flight = in_flight or {}

    def keeps(self, pos, created):
        """True if a message not in flight is kept."""
        return pos >= self.cut and (self.born_after is None
                                    or created > self.born_after)

    def after(self, marker):
        """The position after which to list messages that are not in
        flight, for a read starting after ``marker`` (None: the start)."""
        if not self.cut:
            return marker
        return max(-1 if marker is None else marker, self.cut - 1)


KEEP_ALL = Horizon()


def horizon(qs, retention, now, flights=False):
    """The Horizon of ``retention`` at ``now``; with ``flights`` its
    ``in_flight`` is filled even when ``length`` does not need it."""
    reads = reads_all(retention)
    if not (retention.active or reads):
        return KEEP_ALL
    if not retention.kept_length:
        keep = _time_horizon(retention, now)
        if reads:
            _read_cut(qs, keep, retention, now, stored_cut(qs))
        if flights and keep.cut:
            keep.in_flight = in_flight(qs, now)
        return keep
    # The live claims, the newest page of p/ and the stored cut in one
    # round trip.
    first = min(retention.kept_length + SLACK, connection.LISTING_LIMIT)
    hints, page, stored = qs.store.parallel(lambda read: read(), [
        lambda: _live_hints(qs, now),
        lambda: qs.store.listing(qs.c, 'p/', limit=first, reverse=True),
        lambda: stored_cut(qs)])
    return horizon_of(qs, _newest_first(qs, page, first), retention, now,
                      _members(qs, hints, now), stored)


def horizon_of(qs, entries, retention, now, members, stored=None):
    """The Horizon of ``retention`` given ``p/`` listing ``entries``,
    newest first, read as far as needed, the ``members`` of live claims
    (a container of ids; {id: position} is kept as in_flight) and the
    ``stored`` cut (read when None). A length or read-by-all cut above
    the stored one is stored."""
    keep = _time_horizon(retention, now)
    keep.in_flight = members
    length = retention.kept_length
    reads = reads_all(retention)
    if not (length or reads):
        return keep
    if stored is None:
        stored = stored_cut(qs)
    if reads:
        stored = _read_cut(qs, keep, retention, now, stored)
    keep.cut = max(keep.cut, stored)
    counted = 0
    for fields in (down_to_cut(entries, keep) if length else ()):
        if (fields['e'] <= now or fields['id'] in members
                or not keep.keeps(fields['pos'], fields['cr'])):
            continue
        counted += 1
        if counted == length:
            if fields['pos'] > stored:
                # Never creates the container: a read of a queue deleted
                # (or never made) would make it a queue again.
                qs.store.put(qs.c, names.cut_obj(fields['pos']),
                             recreate=False)
            keep.cut = fields['pos']
            break
    return keep


def reads_nothing(retention):
    """True when ``horizon`` sends no request for ``retention`` (no
    ``length``, no read-by-all cut): its cut follows from the clock."""
    return not (retention.kept_length or reads_all(retention))


def reads_all(retention):
    """True when the queue has ``consumers_required``: its read-by-all
    cut applies, and so does the floor earlier cuts stored, even while
    nothing is read by all now (a consumer went idle or registered)."""
    return (retention.policy == retention_rules.CLEANUP
            and retention.consumers_required is not None)


def _read_cut(qs, keep, retention, now, stored):
    """Raise ``keep.cut`` past what every required consumer has read
    (``retention.read_cut``) and past the ``stored`` floor; store the
    read cut when it is above the floor, so what was read by all stays
    gone. Returns the floor as it is now."""
    read = retention.read_cut
    if read is not None:
        if read >= consumers.READ_ALL:
            # Everything is read now, also what is posted while this
            # runs; only what is older than this instant stays gone.
            floor = now * names.POS_PER_MS
            keep.cut = max(keep.cut, read)
        else:
            floor = read + 1
        if floor > stored:
            qs.store.put(qs.c, names.cut_obj(floor), recreate=False)
            stored = floor
    keep.cut = max(keep.cut, stored)
    return stored


def count_after(qs, retention, now, position):
    """How many messages ``retention`` keeps after ``position`` (None:
    all): a consumer's lag. Swift has no counting index, so this lists
    the ``p/`` entries after the position (a listing page holds 10,000:
    one request per 10,000 messages of lag, and no GET)."""
    keep = horizon(qs, retention, now, flights=True)
    after = -1 if position is None else position
    early = sum(1 for pos in keep.in_flight.values()
                if after < pos < keep.cut)
    start = keep.after(position)
    marker = None if start is None else names.position_obj(start) + '0'
    count = 0
    for entry in qs.store.listing_all(qs.c, 'p/', marker=marker):
        fields = names.position_fields(entry)
        if fields is None or fields['e'] <= now:
            continue
        if (fields['id'] in keep.in_flight
                or keep.keeps(fields['pos'], fields['cr'])):
            count += 1
    return early + count


def stored_cut(qs):
    """The highest length cut an operation has seen, 0 if none."""
    found = qs.store.listing(qs.c, 'k/', limit=1, reverse=True)
    return int(found[0]['name'][2:]) if found else 0


def down_to_cut(entries, keep):
    """The fields of ``p/`` listing ``entries`` (newest first) as long as
    they are at or above the cut; entries not of ours are skipped."""
    for entry in entries:
        fields = names.position_fields(entry)
        if fields is None:
            continue
        if fields['pos'] < keep.cut:
            return
        yield fields


def _time_horizon(retention, now):
    if not retention.time_ms:
        return Horizon()
    born_after = now - retention.time_ms
    return Horizon((born_after + 1) * names.POS_PER_MS, born_after)


def _newest_first(qs, page, limit):
    """``p/`` entries newest first, from ``page`` (the first one, of
    ``limit`` entries at most) on, listing more as they are consumed."""
    while True:
        yield from page
        if len(page) < limit:
            return
        limit = connection.LISTING_LIMIT
        page = qs.store.listing(qs.c, 'p/', marker=page[-1]['name'],
                                limit=limit, reverse=True)


def in_flight(qs, now):
    """{id: position} of every member of a live claim."""
    return _members(qs, _live_hints(qs, now), now)


def _live_hints(qs, now):
    return qs.store.listing_all(qs.c, 'x/',
                                marker='x/' + names.ms(now) + '0')


def _members(qs, hints, now):
    """{id: position} of the members of the live claims ``hints`` list:
    from the hints themselves, so the cut reads no record per claim;
    only a claim whose hint names none has its record read."""
    members, unnamed = {}, []
    for hint in hints:
        named = names.hint_members(hint)
        if named is None:
            unnamed.append(names.parse_expiry(hint['name'])[1])
        else:
            members.update(named)
    claim_ids = list(dict.fromkeys(unnamed))
    for record in qs.store.parallel(qs.claim_record, claim_ids):
        if record is not None and record['e'] > now:
            members.update((m[0], m[1]) for m in record['m'])
    return members


def dropped(qs, keep, limit, pages=DROPPED_PAGES):
    """Up to ``limit`` ``p/`` fields of the oldest messages that ``keep``
    no longer keeps, in-flight ones left out, read from at most ``pages``
    listing pages (claimed messages below the cut are passed over, not
    allowed to stop the cleanup behind them); and whether more may be
    left."""
    if not keep.cut:
        return [], False
    victims, more = _below_cut(qs, keep, limit, limit, pages)
    return victims[:limit], more or len(victims) > limit


def _below_cut(qs, keep, wanted, page, pages, grouped_only=False):
    """``p/`` fields below ``keep``'s cut, in-flight ones left out (and
    ungrouped ones, ``grouped_only``), listed ``page`` entries at a time
    until ``wanted`` are found or ``pages`` were read; and whether the
    listing stopped before its end."""
    victims, marker = [], None
    for _ in range(pages):
        listed = qs.store.listing(qs.c, 'p/', marker=marker,
                                  end_marker=names.position_obj(keep.cut),
                                  limit=page)
        victims += [f for f in map(names.position_fields, listed)
                    if f is not None and f['id'] not in keep.in_flight
                    and (f['g'] or not grouped_only)]
        if len(listed) < page:
            return victims, False
        if len(victims) >= wanted:
            return victims, True
        marker = listed[-1]['name']
    return victims, True


def sweep_groups(qs, keep, now, limit, page=None, pages=1):
    """Claims: remove up to ``limit`` of the oldest dropped group members
    (expired ones included, uncounted), read from at most ``pages``
    listing pages of ``page`` (default ``limit``) ``p/`` entries below the
    cut, so that a dropped head does not block its group; ungrouped ones
    are the cleanup's (they block nothing), as are members beyond that.
    True if any went."""
    if not keep.cut:
        return False
    victims, _ = _below_cut(qs, keep, limit, page or limit, pages,
                            grouped_only=True)
    return bool(victims) and drop(qs, victims[:limit], now)[1]


def drop(qs, victims, now):
    """Remove the messages of ``victims`` (``p/`` fields) that retention
    no longer keeps (module docstring); TTL-expired ones are removed
    uncounted. Returns (removed and counted by this call, progress):
    progress is False when nothing at all could be removed. The locks
    are created together (connection.Store.create_many), so a batch waits
    ``create_settle_time`` once, not once per wave of parallel requests."""
    cache = {}

    def assess(fields):
        """('expired' | 'finished', victim), ('lock', (fields, attempt))
        for one this call may lock, or None to leave it."""
        message_id = fields['id']
        if fields['e'] <= now:
            return 'expired', (message_id, fields['pos'], None, fields['g'])
        attempt, params, lock = _latest_lock(qs, message_id)
        holder = params.get('c')
        if holder == names.RETAIN:
            if summary.age_s(lock, now) <= FINISH_AFTER_S:
                return None
            if qs.store.head(qs.c, names.message_obj(message_id)):
                tally(qs, int(params['t']), message_id)
            return 'finished', (message_id, fields['pos'], attempt - 1,
                                fields['g'])
        if holder in names.TAKEN:
            return None
        if holder is not None:
            record = qs.claim_record(holder, cache)
            if record is not None and record['e'] > now:
                return None
        if qs.store.head(qs.c, names.message_obj(message_id)) is None:
            # Its post is still running (or died: gc's TTL expiry).
            return None
        return 'lock', (fields, attempt)

    assessed = [r for r in qs.store.parallel(assess, victims) if r]
    results = [r for r in assessed if r[0] != 'lock']
    to_lock = [found for kind, found in assessed if kind == 'lock']
    return _lock_and_remove(qs, to_lock, results, now)


def take_over(qs, held, now):
    """A claim or pop that won attempt ``k`` of messages retention no
    longer keeps removes them as :func:`drop` does, with ``l/<id>/<k+1>``
    (``held``: (``p/`` fields, k)): nobody else locks the attempt after
    one held. Returns how many it removed and counted."""
    return _lock_and_remove(qs, held, [], now)[0]


def _lock_and_remove(qs, to_lock, results, now):
    """:func:`drop` from its locks on: ``to_lock`` are (fields, latest
    attempt), ``results`` what was decided without a lock."""
    lock_type = names.content_type(c=names.RETAIN, t=now)
    won = [pair for pair, ours in zip(to_lock, qs.store.create_many(
        qs.c, [(names.lock_obj(fields['id'], attempt + 1),
                {'content_type': lock_type, 'headers': qs.delete_at(now)})
               for fields, attempt in to_lock])) if ours]
    # A lock won where none was listed proves nothing if a consumer's
    # delete was removing the message meanwhile: Swift's bulk delete
    # runs two objects at a time, so its lock can go before its m/. Read
    # after the settle wait, m/ tells: one gone is not counted.
    here = qs.store.parallel(lambda pair: qs.store.head(
        qs.c, names.message_obj(pair[0]['id'])) is not None, won)
    counted = [pair for pair, found in zip(won, here) if found]
    qs.store.parallel(lambda pair: tally(qs, now, pair[0]['id']), counted)
    results += [('won' if found else 'finished',
                 (fields['id'], fields['pos'], attempt, fields['g']))
                for (fields, attempt), found in zip(won, here)]
    if results:
        # In the victims' (position) order, as they were listed.
        results.sort(key=lambda result: result[1][1])
        qs.remove([victim for _, victim in results], now)
    return sum(1 for kind, _ in results if kind == 'won'), bool(results)


def tally(qs, locked_ms, message_id):
    # A queue deleted meanwhile is not created again to count a removal
    # into the queue of its name created after it.
    qs.store.put(qs.c, names.tally_obj(locked_ms, message_id),
                 recreate=False)


def removed(qs):
    """How many messages retention has removed from the queue: the
    newest fold, plus the tallies after it. Tallies are listed first, so
    a fold running meanwhile (which deletes the tallies it covers only
    after writing its total) never counts one twice."""
    tallies = qs.store.listing_all(qs.c, 'n/')
    seq, base, upto = _newest_fold(qs)
    return base + sum(1 for e in tallies if upto is None
                      or e['name'] > upto)


def fold(qs, now, at_least=None):
    """gc, after it finished abandoned removals: fold the tallies older
    than FOLD_AGE_S into one total ``t/<seq + 1>`` (created If-None-Match:
    one of two folders wins), then delete them, so counting stays cheap.
    Returns how many were folded (none while fewer than ``at_least``,
    default FOLD_AT, are ripe)."""
    seq, base, upto = _newest_fold(qs)
    ripe = qs.store.listing(
        qs.c, 'n/', marker=upto,
        end_marker=names.tally_obj(now - FOLD_AGE_S * 1000, ''))
    if not ripe or len(ripe) < (at_least or FOLD_AT):
        return 0
    if not qs.store.create(qs.c, names.total_obj(seq + 1),
                           content_type=names.content_type(
                               n=base + len(ripe), upto=ripe[-1]['name']),
                           recreate=False):
        return 0     # lost to another folder, or the queue went
    qs.store.delete_many(qs.c, [e['name'] for e in ripe] + [
        names.total_obj(s) for s in range(max(0, seq - 1), seq + 1)])
    return len(ripe)


def prune_cuts(qs):
    """gc: delete every stored cut but the highest."""
    cuts = qs.store.listing_all(qs.c, 'k/')
    qs.store.delete_many(qs.c, [e['name'] for e in cuts[:-1]])


def _newest_fold(qs):
    """(seq, count, last tally name covered) of the newest fold."""
    folded = qs.store.listing(qs.c, 't/', limit=1, reverse=True)
    if not folded:
        return 0, 0, None
    params = names.ct_params(folded[0].get('content_type'))
    return (int(folded[0]['name'][2:]), int(params['n']), params['upto'])


def _latest_lock(qs, message_id):
    """(latest attempt, its Content-Type parameters, its listing entry)."""
    best = (0, {}, None)
    for entry in qs.store.listing(qs.c, names.lock_prefix(message_id)):
        attempt = names.parse_lock(entry['name'])[1]
        if attempt > best[0]:
            best = (attempt, names.ct_params(entry.get('content_type')),
                    entry)
    return best


def clean(qs, retention, now, batch):
    """The backend's ``_clean``: remove up to ``batch`` of the oldest
    messages ``retention`` no longer keeps, below the cut, then carried
    in above it (carried.py). Nothing to remove costs the horizon and one
    round of listings (``p/`` below the cut and, under ``time``, ``y/``),
    whatever the backlog."""
    # The live claims' members are known whatever the retention: they
    # are passed over (a claimed message is never removed).
    keep = horizon(qs, retention, now, flights=True)
    (victims, full), marks = qs.store.parallel(lambda read: read(), [
        lambda: dropped(qs, keep, batch),
        lambda: carried.marks(qs, keep)])
    if marks and len(victims) < batch:
        old, more = carried.past_time(qs, keep, marks,
                                      batch - len(victims))
        victims, full = victims + old, full or more
    elif marks:
        full = True
    if not victims:
        return 0, False
    count, progress = drop(qs, victims, now)
    return count, full and progress
