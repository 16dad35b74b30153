"""MongoDB retention: layout, exact reads, bounded work, gc's hook.

The rules themselves are the contract suite's (tests/contract/); these
tests check what is specific to this backend's storage: the counter field,
the index ranges the reads and removals use, the cutoff's fast path, and
that gc() cleans each queue on its own.
"""

import uuid

import pytest

from tests.contract.helpers import bodies, claim, listed, post, stats
from zaqar_delay.drivers.mongodb import fields
from zaqar_delay.drivers.mongodb import retention as kept_by


def retained(make_queue, **settings):
    return make_queue({'_retention': settings})


def stored(driver, queue, project):
    return sorted(doc['_id'] for doc in driver.messages.raw.find(
        fields.queue_filter(queue, project)))


@pytest.fixture
def reads_remove_nothing(monkeypatch):
    """No read or cleaner removes anything: only the window hides."""
    monkeypatch.setattr(kept_by, 'remove',
                        lambda *args, **kwargs: (0, False))


def counter(driver, queue, project):
    return driver.counters.raw.find_one(fields.queue_filter(queue, project))


class Calls:
    """Counts the store calls made through the guarded collections and
    the largest ``limit`` / ``skip`` any ``find`` asked for."""

    def __init__(self, monkeypatch, driver):
        self.count = 0
        self.finds = []
        for name in ('messages', 'counters', 'claims'):
            collection = getattr(driver, name)
            for method in ('find', 'find_one', 'count_documents',
                           'delete_many', 'update_one', 'update_many',
                           'find_one_and_update'):
                monkeypatch.setattr(collection, method,
                                    self._wrap(getattr(collection, method),
                                               method))

    def _wrap(self, real, method):
        def run(*args, **kwargs):
            self.count += 1
            if method == 'find':
                self.finds.append(kwargs.get('skip', 0))
            return real(*args, **kwargs)
        return run


def test_removals_are_counted_in_the_queue_counter(driver, project,
                                                   make_queue):
    queue = retained(make_queue, length=2)
    ids = post(driver, queue, project, *range(5))
    assert driver.message_controller.clean(queue, project, 10) == (3, False)
    assert counter(driver, queue, project)[fields.REMOVED] == 3
    assert stored(driver, queue, project) == sorted(ids[3:])
    assert driver.message_controller.stats(
        queue, project)['retention']['removed'] == 3


@pytest.mark.usefixtures('reads_remove_nothing')
def test_beyond_length_is_for_good_whoever_meets_it(driver, project,
                                                    make_queue):
    # Only the counter's floor (lf) keeps 'a' out once the newer
    # messages that pushed it out are gone.
    queue = retained(make_queue, length=2)
    ids = post(driver, queue, project, 'a', 'b', 'c')
    assert bodies(listed(driver, queue, project)) == ['b', 'c']
    assert counter(driver, queue, project)[fields.LENGTH_FLOOR] == 2
    driver.message_controller.bulk_delete(queue, ids[1:], project=project)
    assert listed(driver, queue, project) == []
    assert claim(driver, queue, project)[1] == []
    assert len(stored(driver, queue, project)) == 1


def test_the_time_removal_has_its_index(driver):
    driver.message_controller
    names = set(driver.messages.raw.index_information())
    assert 'zd_state_created' in names


@pytest.mark.usefixtures('reads_remove_nothing')
def test_reads_are_exact_before_anything_is_removed(driver, project,
                                                    make_queue):
    queue = retained(make_queue, length=3)
    ids = post(driver, queue, project, *range(6))
    assert bodies(listed(driver, queue, project)) == [3, 4, 5]
    assert bodies(driver.message_controller.bulk_get(
        queue, ids, project)) == [3, 4, 5]
    assert driver.message_controller.first(queue, project)['body'] == 3
    assert stats(driver, queue, project)['total'] == 3
    assert bodies(claim(driver, queue, project, limit=10)[1]) == [3, 4, 5]
    assert len(stored(driver, queue, project)) == 6


def test_a_claimed_message_is_kept_and_goes_when_its_claim_ends(
        driver, project, make_queue, clock):
    queue = retained(make_queue, length=2)
    post(driver, queue, project, 'a', 'b')
    claim_id, got = claim(driver, queue, project, limit=1, ttl=60)
    assert bodies(got) == ['a']
    post(driver, queue, project, 'c', 'd')
    # 'a' is held: length counts b, c, d, so b falls out, a stays.
    assert driver.message_controller.clean(queue, project, 10) == (1, False)
    assert bodies(listed(driver, queue, project, include_claimed=True)
                  ) == ['a', 'c', 'd']
    driver.claim_controller.delete(queue, claim_id, project=project)
    # Released: judged like any other, and older than c and d (the
    # listing removes it: reads remove a batch of what they meet).
    assert bodies(listed(driver, queue, project)) == ['c', 'd']
    assert counter(driver, queue, project)[fields.REMOVED] == 2
    assert stats(driver, queue, project)['total'] == 2


def test_a_message_exactly_time_old_is_gone(driver, project, make_queue,
                                            clock):
    queue = retained(make_queue, time=60)
    post(driver, queue, project, 'old')
    clock.advance(30)
    post(driver, queue, project, 'young')
    clock.advance(29.999)
    assert bodies(listed(driver, queue, project)) == ['old', 'young']
    clock.advance(0.001)
    assert bodies(listed(driver, queue, project)) == ['young']
    assert bodies(claim(driver, queue, project)[1]) == ['young']
    assert stats(driver, queue, project)['claimed'] == 1
    assert driver.message_controller.stats(
        queue, project)['retention']['removed'] == 1


def test_a_dropped_group_head_lets_the_same_claim_take_the_next(
        driver, project, make_queue, clock):
    queue = make_queue({'_message_group_key': 'g',
                        '_retention': {'time': 60}})
    post(driver, queue, project, {'g': 'x', 'n': 1})
    clock.advance(31)
    post(driver, queue, project, {'g': 'x', 'n': 2})
    clock.advance(30)
    got = claim(driver, queue, project)[1]
    assert [m['body']['n'] for m in got] == [2]
    head = driver.messages.raw.find_one(fields.queue_filter(
        queue, project, **{fields.HEAD: {'$exists': True}}))
    assert head['_id'] == got[0]['id']


def test_heads_beyond_one_batch_wait_and_are_never_handed_out_early(
        driver, project, make_queue, clock, monkeypatch):
    monkeypatch.setattr(kept_by, 'READ_BATCH', 2)
    queue = make_queue({'_message_group_key': 'g',
                        '_retention': {'time': 60}})
    for group in 'abcde':
        post(driver, queue, project, {'g': group, 'n': 1})
    clock.advance(31)
    for group in 'abcde':
        post(driver, queue, project, {'g': group, 'n': 2})
    clock.advance(30)
    handed = []
    for _ in range(5):
        handed += [(m['body']['g'], m['body']['n'])
                   for m in claim(driver, queue, project)[1]]
    # Every old head went; each group's second member came out once.
    assert sorted(handed) == [(group, 2) for group in 'abcde']


@pytest.mark.parametrize('limit', [1, 10])
def test_pops_never_take_what_retention_dropped_beyond_one_batch(
        driver, project, make_queue, clock, monkeypatch, limit):
    # A read removes one batch of what retention dropped; the rest stays
    # stored until later reads or gc, and a pop (of one: one sorted
    # findAndModify, claims._take_ready) must pass over it.
    monkeypatch.setattr(kept_by, 'READ_BATCH', 2)
    queue = make_queue({'_retention': {'time': 60}})
    post(driver, queue, project, *range(5))
    clock.advance(31)
    post(driver, queue, project, 'young')
    clock.advance(30)
    popped = driver.message_controller.pop(queue, limit, project=project)
    assert [m['body'] for m in popped] == ['young']


def test_nothing_to_remove_costs_the_same_whatever_the_queue_holds(
        driver, project, make_queue, monkeypatch):
    """The cleaner's work with nothing to remove: two probes for the
    length cutoff and one for time, never a walk of the queue."""
    small = retained(make_queue, length=1000, time=3600)
    big = retained(make_queue, length=1000, time=3600)
    post(driver, small, project, *range(10))
    for start in range(0, 1000, 100):
        post(driver, big, project, *range(start, start + 100))
    costs = {}
    for queue in (small, big):
        calls = Calls(monkeypatch, driver)
        assert driver.message_controller.clean(queue, project, 100) == (
            0, False)
        costs[queue] = (calls.count, max(calls.finds))
        monkeypatch.undo()
    assert costs[small] == costs[big]
    assert costs[big][1] == 0       # no skip: the cutoff's fast path


def test_the_cutoff_walk_is_bounded_by_length(driver, project, make_queue,
                                              monkeypatch):
    """Past the fast path (a queue over ``length``, or holes in it) the
    cutoff is found by walking ``length`` index entries, not the queue."""
    queue = retained(make_queue, length=5)
    post(driver, queue, project, *range(40))
    calls = Calls(monkeypatch, driver)
    kept_by.window(driver, queue, project,
                   driver.message_controller.retention_of(queue, project),
                   driver.now())
    assert max(calls.finds) == 4


def test_removal_takes_one_bounded_batch(driver, project, make_queue):
    queue = retained(make_queue, length=1)
    post(driver, queue, project, *range(25))
    assert driver.message_controller.clean(queue, project, 10) == (10, True)
    assert driver.message_controller.clean(queue, project, 10) == (10, True)
    assert driver.message_controller.clean(queue, project, 10) == (4, False)
    assert driver.message_controller.clean(queue, project, 10) == (0, False)
    assert counter(driver, queue, project)[fields.REMOVED] == 24


def test_expired_messages_are_not_counted_as_retention(driver, project,
                                                       make_queue, clock):
    queue = retained(make_queue, time=600)
    post(driver, queue, project, 'short', ttl=60)
    clock.advance(601)
    driver.gc()
    assert stored(driver, queue, project) == []
    assert driver.message_controller.stats(
        queue, project)['retention']['removed'] == 0


def test_disabled_policy_removes_nothing(driver, project, make_queue):
    queue = retained(make_queue, policy='disabled', length=1)
    post(driver, queue, project, *range(3))
    assert driver.message_controller.clean(queue, project, 10) == (0, False)
    assert bodies(listed(driver, queue, project)) == [0, 1, 2]


def test_gc_cleans_every_queue_and_one_failing_queue_stops_none(
        driver, project, make_queue, monkeypatch):
    first = retained(make_queue, length=1)
    second = retained(make_queue, length=1)
    post(driver, first, project, *range(3))
    post(driver, second, project, *range(3))
    real = driver.message_controller.clean

    def broken(queue, project_, batch):
        if queue == first:
            raise RuntimeError('this queue is broken')
        return real(queue, project_, batch)

    monkeypatch.setattr(driver.message_controller, 'clean', broken)
    result = driver.gc()
    assert (result.retention, result.skipped) == (2, 1)
    assert len(stored(driver, first, project)) == 3
    assert len(stored(driver, second, project)) == 1
    monkeypatch.undo()
    assert driver.gc().retention == 2
    assert len(stored(driver, first, project)) == 1


def test_list_groups_shows_what_retention_keeps(driver, project, make_queue):
    queue = make_queue({'_message_group_key': 'g',
                        '_retention': {'length': 2}})
    post(driver, queue, project, *[{'g': 'x', 'n': n} for n in range(4)])
    pages = driver.message_controller.list_groups(queue, project=project)
    groups = list(next(pages))
    assert [(g['id'], g['depth']) for g in groups] == [('x', 2)]
    assert [m['body']['n'] for m in claim(driver, queue, project)[1]] == [2]


@pytest.mark.parametrize('batch', [1, 3])
def test_move_group_carries_only_what_is_kept(driver, project, make_queue,
                                              monkeypatch, batch):
    monkeypatch.setattr(kept_by, 'READ_BATCH', batch)
    queue = make_queue({'_message_group_key': 'g',
                        '_retention': {'length': 2}})
    target = make_queue()
    post(driver, queue, project, *[{'g': 'x', 'n': n} for n in range(5)])
    assert driver.message_controller.move_group(
        queue, 'x', target, project=project) == 2
    assert [m['body']['n'] for m in listed(driver, target, project)
            ] == [3, 4]


def test_the_cutoff_walk_reads_index_keys_unless_something_expired(
        driver, project, make_queue, clock, monkeypatch):
    queue = retained(make_queue, length=2)
    ids = post(driver, queue, project, 'a')
    ids += post(driver, queue, project, 'short', ttl=60)
    clock.advance(61)
    ids += post(driver, queue, project, 'b')
    walks = []
    real = driver.messages.find

    def find(query, projection=None, sort=None, limit=0, hint=None,
             skip=0):
        if skip:
            walks.append(set(query))
        return real(query, projection, sort, limit, hint, skip)

    monkeypatch.setattr(driver.messages, 'find', find)
    # 'short' expired, not purged yet: it must not count against length,
    # so this walk fetches documents to check e.
    assert bodies(driver.message_controller.bulk_get(
        queue, ids, project)) == ['a', 'b']
    assert walks.pop() == {'p', 'q', 's', 'e'}
    # Purged (listing settles first): nothing expired is left, and the
    # walk's filter and sort are all in {p, q, s, k} (covered).
    assert bodies(listed(driver, queue, project)) == ['a', 'b']
    assert walks.pop() == {'p', 'q', 's'}


class Reads:
    """Records each ``find`` and ``count_documents`` sent to the
    messages collection: (filter, sort, limit, hint)."""

    def __init__(self, monkeypatch, driver):
        self.finds, self.counts = [], []
        real_find = driver.messages.find
        real_count = driver.messages.count_documents

        def find(query, projection=None, sort=None, limit=0, hint=None,
                 skip=0):
            self.finds.append((query, sort, limit, hint))
            return real_find(query, projection, sort, limit, hint, skip)

        def count_documents(query, **kwargs):
            self.counts.append((query, None, 0, kwargs.get('hint')))
            return real_count(query, **kwargs)

        monkeypatch.setattr(driver.messages, 'find', find)
        monkeypatch.setattr(driver.messages, 'count_documents',
                            count_documents)

    def of_kept(self):
        """The reads that may match unclaimed messages at any position
        (listings, first, oldest/newest, counts, lag): not the settle and
        removal steps, which name the states they change (and expired
        messages), nor lookups by id, nor reads of claimed messages."""
        return [read for read in self.finds + self.counts
                if _reads_unclaimed(read[0])]


def _reads_unclaimed(where):
    state = where.get(fields.STATE)
    if '_id' in where or where.get(fields.EXPIRES, {}).get('$lte'):
        return False
    return state is None or state == {'$ne': fields.MOVING} or (
        isinstance(state, dict) and fields.CLAIMED in state.get('$in', ()))


def _claimed_in_an_or(where):
    """Whether the claimed state appears inside an ``$or`` (the shape
    that leaves an index range unbounded below)."""
    if isinstance(where, list):
        return any(_claimed_in_an_or(part) for part in where)
    if not isinstance(where, dict):
        return False
    return any((key == '$or' and {fields.STATE: fields.CLAIMED} in value)
               or _claimed_in_an_or(value) for key, value in where.items())


def behind_a_hidden_backlog(driver, project, make_queue, backlog):
    """A queue keeping 3 by length, its oldest message held by a claim,
    ``backlog`` messages hidden behind the 3 it keeps, nothing removed
    (reads_remove_nothing), and a persistent consumer with no cursor.
    Returns (queue, consumer's client id, subscription id)."""
    queue = retained(make_queue, length=3)
    post(driver, queue, project, 'held')
    assert bodies(claim(driver, queue, project, limit=1)[1]) == ['held']
    post(driver, queue, project, *range(backlog + 3))
    reader = uuid.uuid4()
    sid = driver.subscription_controller.create(
        queue, 'cursor:' + str(reader), 3600, {}, project=project)
    return queue, reader, sid


def read_as_a_consumer(driver, project, queue, reader, sid):
    """A consumer's page, first, stats (oldest) and the lag."""
    messages = driver.message_controller
    pages = messages.list(queue, project=project, client_uuid=reader)
    page = bodies(next(pages))
    oldest = messages.first(queue, project)['body']
    total = messages.stats(queue, project)['messages']['total']
    lag = driver.subscription_controller.get(
        queue, sid, project=project)['options']['lag']
    return page, oldest, total, lag


@pytest.mark.usefixtures('reads_remove_nothing')
def test_reads_of_kept_messages_are_bounded_below_by_the_cutoff(
        driver, project, make_queue, monkeypatch):
    backlog = 20
    queue, reader, sid = behind_a_hidden_backlog(driver, project,
                                                 make_queue, backlog)
    cutoff = counter(driver, queue, project)['n'] - 2
    reads = Reads(monkeypatch, driver)
    assert read_as_a_consumer(driver, project, queue, reader, sid) == (
        ['held', backlog, backlog + 1, backlog + 2], 'held', 4, 4)
    kept = reads.of_kept()
    assert kept
    for where, _, _, hint in kept:
        # A top-level range from the cutoff on, so the index range never
        # starts among the hidden messages; the claimed ones it leaves
        # out are a read of the claimed state alone.
        assert where[fields.POSITION]['$gte'] >= cutoff, where
        assert not _claimed_in_an_or(where), where
    held = [read for read in reads.finds + reads.counts
            if read[0].get(fields.STATE) == fields.CLAIMED
            and '$and' in read[0]]
    assert held and all(hint == 'zd_state_position'
                        for _, _, _, hint in held)


def explained(driver, where, sort, limit, hint):
    """executionStats of a find or count as the driver sent it."""
    if sort is None and not limit:
        command = {'count': fields.MESSAGES, 'query': where}
        if hint:
            command['hint'] = hint
        return driver.database.command(
            'explain', command, verbosity='executionStats')[
                'executionStats']
    return driver.messages.raw.find(where, sort=sort, limit=limit,
                                    hint=hint).explain()['executionStats']


@pytest.mark.usefixtures('reads_remove_nothing')
def test_real_server_reads_behind_a_hidden_backlog_examine_what_is_kept(
        driver, real_server, project, make_queue, monkeypatch):
    queue, reader, sid = behind_a_hidden_backlog(driver, project,
                                                 make_queue, 500)
    reads = Reads(monkeypatch, driver)
    read_as_a_consumer(driver, project, queue, reader, sid)
    monkeypatch.undo()
    checked = 0
    for where, sort, limit, hint in reads.of_kept():
        if hint is None:
            # stats' total: a count of every live message, whichever
            # index the planner takes (a count, never a page).
            continue
        stats = explained(driver, where, sort, limit, hint)
        # 3 kept and 1 held; a few keys more for the ends of the
        # ranges merged by state.
        assert stats['totalKeysExamined'] <= 12, (where, stats)
        assert stats['totalDocsExamined'] <= 8, (where, stats)
        checked += 1
    assert checked
