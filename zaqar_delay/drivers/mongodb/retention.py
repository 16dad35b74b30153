"""Retention on MongoDB (SPEC §5): what a queue keeps, exactly, at "now".

The rules are zaqar_delay/retention.py's; this module turns them into two
conditions on stored fields, computed once per operation (a
:class:`Window`):

* kept by time: ``cr > now - time`` (``created_after``);
* kept by length: ``k >= cutoff`` (``position_from``), where ``cutoff`` is
  the position of the ``length``-th newest *keepable* message: live
  (``e > now``), kept by time, in state ``r``, ``d`` or ``b``. Claimed
  (``c``) and moving (``m``) messages are held: never judged, never
  counted, until their claim ends (or their move is undone).

Every read adds the window to its query (:meth:`Window.restrict`), so a
message that is not kept is returned by no read even before it is
removed; ``k >= cutoff`` is an index bound on ``{p, q, s, k}``, so
claims and listings start at the cutoff instead of filtering past what
fell out. Reads that may match claimed messages keep that bound too and
read the held ones it leaves out apart (:meth:`Window.kept_or_held`).

Gone means gone: a message once beyond ``length`` does not come back
when newer ones are claimed, deleted or expire, whether or not it was
physically removed yet. So the cutoff only moves up: the queue's counter
document keeps the highest one found (``lf``, raised with ``$max``), and
each read takes the higher of it and the cutoff at "now".

Finding the cutoff: ``n`` (the queue's last position, from its counter)
bounds every position, so while the oldest keepable message at or above
``lf`` is within the last ``length`` positions nothing new can be beyond
``length`` (two index probes: the counter and that message). Only past
that does the driver walk the ``{p, q, s, k}`` index down from the
newest keepable message, ``length`` entries at most; its cost is bounded
by ``length``, never by what the queue holds beyond it, and while no
expired or too old message is left it reads index keys only.

Removing (:func:`remove`): one bounded batch of keepable messages that
are not kept (by time through ``zd_state_created``, by length through
``zd_state_position``, oldest first), deleted with a filter that repeats
the state, liveness and window conditions, so a message claimed, moved
or expired in between is left alone and no message is deleted twice.
The queue's counter document then gains exactly what this delete
removed (``rm += deleted_count``): two cleaners never count one removal
twice; a crash between the delete and the ``$inc`` (or a lost reply of
the delete) leaves that batch uncounted, never double counted. Groups
whose head went are advanced afterwards (a crash in between: gc's
group repair, as for every other removal).
"""

import dataclasses

from zaqar_delay import retention as rules
from zaqar_delay.drivers.mongodb import fields as f
from zaqar_delay.drivers.mongodb import groups
from zaqar_delay.drivers.mongodb import queries
from zaqar_delay.drivers.mongodb import reservations

# Messages removed by a claim, pop, listing or first before it reads.
READ_BATCH = 100
# Where the claimed messages a window leaves out are read: the claimed
# range of the state index (queries.in_state).
HELD_INDEX = 'zd_state_position'


@dataclasses.dataclass(frozen=True)
class Window:
    """What retention keeps of a queue at one instant."""

    created_after: int = None      # kept by time: cr > created_after
    position_from: int = None      # kept by length: k >= position_from

    @property
    def bounded(self):
        return self.created_after is not None or (
            self.position_from is not None)

    def kept(self):
        """The filter of the messages kept by time and length."""
        query = {}
        if self.created_after is not None:
            query[f.CREATED] = {'$gt': self.created_after}
        if self.position_from is not None:
            query[f.POSITION] = {'$gte': self.position_from}
        return query

    def dropped(self):
        """The filter of the messages time or length no longer keeps
        (held ones excepted: the caller adds the state condition)."""
        either = []
        if self.created_after is not None:
            either.append({f.CREATED: {'$lte': self.created_after}})
        if self.position_from is not None:
            either.append({f.POSITION: {'$lt': self.position_from}})
        return either[0] if len(either) == 1 else {'$or': either}

    def restrict(self, query):
        """Narrow a read's ``query`` to what is kept, the bounds at its
        top level (``k >= cutoff`` bounds its index range). For a query
        that may match claimed messages, see :meth:`kept_or_held`.
        Returns ``query``."""
        if not self.bounded:
            return query
        kept = self.kept()
        for field, condition in kept.items():
            if isinstance(query.get(field), dict):
                query[field] = dict(query[field], **condition)
            else:
                query[field] = condition
        return query


    def kept_or_held(self, query, index=None):
        """``[(filter, index)]`` whose matches, together, are what
        ``query`` (read through ``index``) matches that is kept, claimed
        messages being kept whatever their age or position.

        ``query`` :meth:`restrict`-ed, so its index range starts at the
        cutoff and never walks the messages the window hides (an ``$or``
        with the claimed state would leave the range unbounded below);
        the claimed messages that leaves out are a second, small read of
        ``{p, q, "c", k}``: only those in flight. The two never share a
        message, so their counts add up.
        """
        if not self.bounded:
            return [(query, index)]
        held = dict(query, **{f.STATE: f.CLAIMED})
        held['$and'] = query.get('$and', []) + [self.dropped()]
        return [(self.restrict(dict(query)), index), (held, HELD_INDEX)]


EVERYTHING = Window()


def keeps_everything(retention):
    """Whether ``retention`` keeps every live message, known without a
    request: no time or length limit, no read-by-all cut."""
    return not retention.active and not (
        retention.policy == rules.CLEANUP
        and retention.consumers_required is not None)


def window(driver, queue, project, retention, now):
    """The :class:`Window` of ``queue`` at ``now`` under ``retention``."""
    if keeps_everything(retention):
        return EVERYTHING
    reads = retention.consumers_required is not None
    created_after = now - retention.time_ms if retention.time_ms else None
    position_from = None
    if retention.kept_length:
        position_from = _cutoff(driver, queue, project,
                                retention.kept_length, created_after, now)
    if reads:
        floor = _read_floor(driver, queue, project, retention.read_cut,
                            now)
        if floor is not None and (position_from is None
                                  or floor >= position_from):
            position_from = floor + 1
    return Window(created_after, position_from)


def _read_floor(driver, queue, project, cut, now):
    """The highest read-by-all cut ever applied to the queue (``rf``,
    raised with ``$max``), ``cut`` included, or None: a message read by
    all stays gone when the cut later falls (a consumer goes idle or
    leaves). ``cut`` is capped below the positions a post may still fill
    (reservations.horizon: at most the queue's last position), so
    READ_ALL covers what is stored now, never what is posted later."""
    where = f.queue_filter(queue, project)
    counter = driver.counters.find_one(where, {'n': True,
                                               f.READ_FLOOR: True,
                                               f.RESERVATIONS: True})
    if counter is None:
        return None
    floor = counter.get(f.READ_FLOOR)
    if cut is not None:
        cut = min(cut, reservations.horizon(
            counter, now, reservations.timeout_ms(driver)) - 1)
        if floor is None or cut > floor:
            driver.counters.update_one(where,
                                       {'$max': {f.READ_FLOOR: cut}})
            floor = cut
    return floor


def _cutoff(driver, queue, project, length, created_after, now):
    """The lowest position kept by length, or None while nothing has
    ever been beyond ``length``. It only moves up (the counter's ``lf``
    keeps the highest one found): a message once beyond ``length`` stays
    gone when newer ones leave, whichever read meets it."""
    counter = driver.counters.find_one(f.queue_filter(queue, project),
                                       {'n': True, f.LENGTH_FLOOR: True})
    if counter is None:
        return None
    floor = counter.get(f.LENGTH_FLOOR)
    oldest = _first(driver, queries.keepable_positions(queue, project,
                                                       floor))
    # Positions are never above n: at most n - k + 1 messages from k on.
    if oldest is None or oldest[f.POSITION] > counter['n'] - length:
        return floor
    found = _walk(driver, queue, project, length, created_after, now)
    if found is None or (floor is not None and found <= floor):
        return floor
    driver.counters.update_one(f.queue_filter(queue, project),
                               {'$max': {f.LENGTH_FLOOR: found}})
    return found


def _walk(driver, queue, project, length, created_after, now):
    """The position of the ``length``-th newest keepable message, or
    None. While the queue holds no expired message and none too old (two
    index probes, after the reads' purges usually true), every keepable
    one counts, and the walk reads ``length`` index keys only; otherwise
    it fetches each document to check ``e`` and ``cr``."""
    covered = _first(driver, queries.expired(queue, project, now)) is None
    if covered and created_after is not None:
        covered = _first(driver, queries.too_old(queue, project, now,
                                                 created_after)) is None
    walk = (queries.keepable_positions(queue, project, sort=-1) if covered
            else queries.keepable(queue, project, now, created_after))
    found = driver.messages.find(walk.filter,
                                 {f.POSITION: True, '_id': False},
                                 walk.sort, 1, walk.index, skip=length - 1)
    return found[0][f.POSITION] if found else None


def _first(driver, query):
    """The first document of ``query`` (its position only), or None."""
    found = driver.messages.find(query.filter,
                                 {f.POSITION: True, '_id': False},
                                 query.sort, 1, query.index)
    return found[0] if found else None


def remove(driver, queue, project, window_, now, batch):
    """Remove up to ``batch`` messages ``window_`` no longer keeps;
    returns (removed, more): ``more`` when a batch came back full."""
    if not window_.bounded:
        return 0, False
    found = []
    if window_.created_after is not None:
        old = queries.too_old(queue, project, now, window_.created_after)
        found = driver.messages.find(old.filter, {f.GROUP: True}, old.sort,
                                     batch, old.index)
    if window_.position_from is not None and len(found) < batch:
        out = queries.beyond_length(queue, project, now,
                                    window_.created_after,
                                    window_.position_from)
        found += driver.messages.find(out.filter, {f.GROUP: True},
                                      out.sort, batch - len(found),
                                      out.index)
    if not found:
        return 0, False
    # The filter repeats state, liveness and window: a message claimed,
    # moved or expired since it was found stays, and one another cleaner
    # deleted is not counted here.
    doomed = dict(queries.keepable(queue, project, now).filter,
                  _id={'$in': [doc['_id'] for doc in found]})
    doomed.update(window_.dropped())
    try:
        removed = driver.messages.delete_many(doomed).deleted_count
        if removed:
            driver.counters.update_one(f.queue_filter(queue, project),
                                       {'$inc': {f.REMOVED: removed}})
    finally:
        # Deleted first, advanced after, also when the delete's reply is
        # lost (pymongo never resends a deleteMany, and the retry finds
        # them gone). A crash in between leaves groups without a head,
        # which gc's groups.repair finds.
        groups.advance_all(driver, queue, project, groups.groups_of(found),
                           now)
    return removed, len(found) == batch


def settle(driver, queue, project, retention, now, whole=False):
    """A read's retention step: the window, after removing one batch
    (READ_BATCH) of what it no longer keeps (``whole``: all of it, in
    batches)."""
    window_ = window(driver, queue, project, retention, now)
    while True:
        _, more = remove(driver, queue, project, window_, now, READ_BATCH)
        if not whole or not more:
            return window_


def removed(driver, queue, project):
    """How many messages retention has removed from the queue."""
    counter = driver.counters.find_one(f.queue_filter(queue, project),
                                       {f.REMOVED: True})
    return (counter or {}).get(f.REMOVED, 0)
