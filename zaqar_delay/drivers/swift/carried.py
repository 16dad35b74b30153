"""Messages carried in from another store on Swift (zaqar-delay-migrate).

A carried message keeps its age (``cr`` = now - age) but takes a new
position, so retention's time cut, which goes by position (retention.py),
passes it only ``time`` after it arrived. Reads judge its ``cr`` already,
and so do claims and pops (claims.py). For the cleanup, an insert that
carries messages in marks their positions, ``y/<first>`` (names.py): a
cleanup step lists the marks in the round of its listing below the cut
(a queue nothing was carried into pays no round trip for them), and the
``p/`` entries of a mark only once its oldest message is past ``time``.
A mark goes once the cut passed its last position (the cleanup below the
cut takes over) or nothing is left in its range; X-Delete-At removes it
once its messages expired in any case.

Inserts before 2026-12-06 wrote no mark: ``zaqar-delay-migrate
--upgrade-layout`` marks what they carried in (mark_unmarked).
"""

import bisect
import itertools

from zaqar_delay.drivers.swift import connection
from zaqar_delay.drivers.swift import names

# Listing pages (of marks, then of p/ entries) one cleanup step reads.
PAGES = 10

# A post's position follows its clock (posts.first_free), ahead of its
# ``cr`` only by what posts faster than 1,000 a millisecond run up, or a
# poster's clock lagging another's: a message whose position is further
# past its ``cr`` kept an age it was carried in with. One carried in
# younger goes at most this late; marking one that was not costs a
# cleanup step a listing of its range, nothing more (its messages are
# judged as any).
CARRIED_GAP_MS = 1_000


def mark(qs, messages, now):
    """Mark ``messages`` (state.Message, at their positions) that are
    older than ``now``: one PUT for an insert that carries any in, none
    for a post. Before their filing, so a cleanup finds each one that a
    claim could."""
    old = [m for m in messages if m.created < now]
    if not old:
        return
    positions = [m.pos for m in old]
    qs.store.put(qs.c, names.carried_obj(min(positions)),
                 content_type=names.content_type(
                     last=max(positions), cr=min(m.created for m in old)),
                 headers=qs.delete_at(max(m.expires for m in old)))


def marks(qs, keep):
    """The marks a cleanup step under ``keep`` (retention.Horizon) looks
    at; none, and no request, where no ``time`` applies."""
    if keep.born_after is None:
        return []
    return qs.store.listing_all(qs.c, 'y/',
                                cap=PAGES * connection.LISTING_LIMIT)


def past_time(qs, keep, listed, limit):
    """Up to ``limit`` ``p/`` fields of marked messages at or above the
    cut that ``keep`` no longer keeps by age, in-flight ones left out,
    from the ``listed`` marks; and whether more may be left."""
    victims, retired, pages = [], [], PAGES
    more = len(listed) >= PAGES * connection.LISTING_LIMIT
    for entry in listed:
        params = names.ct_params(entry.get('content_type'))
        first, last = int(entry['name'][2:]), int(params['last'])
        if last < keep.cut:
            retired.append(entry['name'])
            continue
        if int(params['cr']) > keep.born_after:
            continue
        if len(victims) >= limit or not pages:
            more = True
            break
        found, whole, pages = _range(qs, max(first, keep.cut), last,
                                     pages)
        old = [f for f in found if f['id'] not in keep.in_flight
               and not keep.keeps(f['pos'], f['cr'])]
        victims += old
        if whole and not old:
            _move_on(qs, entry, retired, found)
        more = more or not whole
    if retired:
        qs.store.delete_many(qs.c, retired)
    return victims[:limit], more or len(victims) > limit


def _range(qs, start, last, pages):
    """(``p/`` fields from ``start`` on, True if they reach ``last``, the
    pages left of ``pages``)."""
    found, marker = [], names.position_obj(start - 1)
    while pages:
        pages -= 1
        listed = qs.store.listing(qs.c, 'p/', marker=marker,
                                  end_marker=names.position_obj(last + 1))
        found += [f for f in map(names.position_fields, listed)
                  if f is not None]
        if len(listed) < connection.LISTING_LIMIT:
            return found, True, pages
        marker = listed[-1]['name']
    return found, False, pages


def _move_on(qs, entry, retired, found):
    """A mark whose range holds nothing past time: retired when nothing
    is left in it, else its ``cr`` moved on to the oldest one left, so
    steps skip it until that one is past time too (claimed ones are
    left in it: they are judged once their claims end)."""
    if not found:
        retired.append(entry['name'])
        return
    params = names.ct_params(entry.get('content_type'))
    oldest = min(f['cr'] for f in found)
    if oldest > int(params['cr']):
        # Never creates the container: a queue deleted meanwhile stays so.
        qs.store.put(qs.c, entry['name'], content_type=names.content_type(
            last=params['last'], cr=oldest), headers=qs.delete_at(
                max(f['e'] for f in found)), recreate=False)


def mark_unmarked(qs):
    """Mark what inserts before marks existed carried into ``qs``: one
    ``y/`` per run of such messages in position order that no mark
    covers, a run at most a listing page long. Reads the queue a page
    at a time (the marks' listing, then one listing per 10,000 ``p/``
    entries and the PUTs of a page's runs in parallel); run again, it
    writes nothing new. Returns (messages marked, marks written)."""
    marked = sorted((int(e['name'][2:]),
                     int(names.ct_params(e.get('content_type'))['last']))
                    for e in qs.store.listing_all(qs.c, 'y/'))
    firsts = [first for first, _ in marked]
    # Marks may overlap (inserts racing): the furthest any reaches.
    reach = list(itertools.accumulate((last for _, last in marked), max))

    def unmarked_carry(fields):
        ahead = fields['pos'] // names.POS_PER_MS - fields['cr']
        if ahead <= CARRIED_GAP_MS:
            return False
        index = bisect.bisect_right(firsts, fields['pos']) - 1
        return index < 0 or reach[index] < fields['pos']

    counts, run, marker = [0, 0], [], None
    while True:
        listed = qs.store.listing(qs.c, 'p/', marker=marker)
        runs = []
        for fields in filter(None, map(names.position_fields, listed)):
            if unmarked_carry(fields):
                run.append(fields)
                if len(run) < connection.LISTING_LIMIT:
                    continue
            if run:
                runs.append(run)
                run = []
        if len(listed) < connection.LISTING_LIMIT:
            runs += [run] if run else []
        _write_marks(qs, runs, counts)
        if len(listed) < connection.LISTING_LIMIT:
            return tuple(counts)
        marker = listed[-1]['name']


def _write_marks(qs, runs, counts):
    # Never creates the container: a queue deleted meanwhile stays so.
    qs.store.parallel(lambda run: qs.store.put(
        qs.c, names.carried_obj(run[0]['pos']),
        content_type=names.content_type(
            last=run[-1]['pos'], cr=min(f['cr'] for f in run)),
        headers=qs.delete_at(max(f['e'] for f in run)), recreate=False),
        runs)
    counts[0] += sum(map(len, runs))
    counts[1] += len(runs)
