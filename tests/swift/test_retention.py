"""Swift-specific retention: layout, the cut, counting once, tombstones,
bounded work (requests counted, never timed).

The contract suite covers the behaviour on every backend; these tests look
at the objects and at what two cleaners or a dead remover leave behind.
Retention is set through the tenant's ``_retention`` metadata (the
operator's defaults remove nothing here).
"""

import json
import threading
import time
import uuid

import pytest

from tests.contract.helpers import bodies, claim, listed, post, stats
from tests.swift.requests import Requests
from zaqar_delay import errors
from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import retention as swift_retention


def kept_queue(make_queue, grouped=False, **retention):
    metadata = {'_retention': retention}
    if grouped:
        metadata['_message_group_key'] = 'g'
    return make_queue(metadata)


def objects(driver, qs, prefix):
    return [e['name'] for e in driver.store.listing_all(qs.c, prefix)]


def removed(driver, queue, project):
    return driver.message_controller.stats(
        queue, project)['retention']['removed']


def clean(driver, queue, project):
    return driver.clean_queue(queue, project)


def test_length_hides_the_oldest_until_cleanup_removes_and_counts_them(
        driver, clock, make_queue, project):
    queue = kept_queue(make_queue, length=3)
    ids = post(driver, queue, project, *range(5))
    mc = driver.message_controller
    # Exact at read time, before anything is removed.
    assert bodies(listed(driver, queue, project)) == [2, 3, 4]
    assert bodies(listed(driver, queue, project, include_claimed=True,
                         include_delayed=True)) == [2, 3, 4]
    assert [m['id'] for m in mc.bulk_get(queue, ids, project)] == ids[2:]
    assert mc.first(queue, project)['body'] == 2
    assert mc.first(queue, project, sort=-1)['body'] == 4
    assert stats(driver, queue, project)['total'] == 3
    qs = driver.queue_state(queue, project)
    assert len(objects(driver, qs, 'p/')) == 5
    assert removed(driver, queue, project) == 0
    assert clean(driver, queue, project) == 2
    assert len(objects(driver, qs, 'p/')) == 3
    assert not any(driver.store.head(qs.c, names.message_obj(i))
                   for i in ids[:2])
    # One tally per removal; each removed message keeps its ret lock as
    # a tombstone.
    assert sorted(n.rsplit('/', 1)[1] for n in objects(driver, qs, 'n/')) \
        == sorted(ids[:2])
    locks = driver.store.listing_all(qs.c, 'l/')
    assert {names.parse_lock(e['name']) for e in locks} == {
        (i, 1) for i in ids[:2]}
    assert all(names.ct_params(e['content_type'])['c'] == names.RETAIN
               for e in locks)
    assert removed(driver, queue, project) == 2
    # Nothing left to remove: nothing counted twice.
    assert clean(driver, queue, project) == 0
    assert removed(driver, queue, project) == 2
    assert bodies(claim(driver, queue, project)[1]) == [2, 3, 4]


def test_time_hides_messages_exactly_time_old(driver, clock, make_queue,
                                              project):
    queue = kept_queue(make_queue, time=10)
    post(driver, queue, project, 'old')
    clock.advance(5)
    post(driver, queue, project, 'young')
    clock.advance(5)     # 'old' is exactly 10 s old: gone
    assert bodies(listed(driver, queue, project)) == ['young']
    assert stats(driver, queue, project)['total'] == 1
    assert clean(driver, queue, project) == 1
    clock.advance(4.999)
    assert bodies(claim(driver, queue, project)[1]) == ['young']
    assert removed(driver, queue, project) == 1


def test_a_claimed_message_is_kept_until_its_claim_ends(
        driver, clock, make_queue, project):
    queue = kept_queue(make_queue, length=2)
    ids = post(driver, queue, project, 0, 1)
    claim_id, taken = claim(driver, queue, project, limit=1)
    assert bodies(taken) == [0]
    post(driver, queue, project, 2, 3)
    # 0 is in flight: not counted in length, not removed, still readable.
    assert clean(driver, queue, project) == 1          # 1 went
    assert driver.message_controller.get(queue, ids[0], project)['body'] == 0
    assert bodies(listed(driver, queue, project, include_claimed=True)) == [
        0, 2, 3]
    assert stats(driver, queue, project)['claimed'] == 1
    # Its claim ends: judged like any other, and too old to be kept.
    driver.claim_controller.delete(queue, claim_id, project)
    assert bodies(listed(driver, queue, project)) == [2, 3]
    assert clean(driver, queue, project) == 1
    assert removed(driver, queue, project) == 2


def record_reads(driver, monkeypatch):
    """The claim records (``c/``) the driver GETs, by name."""
    reads, real_call = [], driver.store.call

    def call(method, *args, **kwargs):
        if method == 'get_object' and args[1].startswith('c/'):
            reads.append(args[1])
        return real_call(method, *args, **kwargs)

    monkeypatch.setattr(driver.store, 'call', call)
    return reads


def test_the_length_cut_reads_no_claim_record_per_live_claim(
        driver, make_queue, project, monkeypatch):
    """The cut needs the members of every live claim: their ``x/`` hints
    name them, so a get or delete on a queue with 12 live claims reads
    none of the 12 records (before: one GET per live claim, on every
    claim, pop, list, get and delete of a queue with ``length``)."""
    queue = kept_queue(make_queue, length=100)
    ids = post(driver, queue, project, *range(13))
    for _ in range(12):
        assert len(claim(driver, queue, project, limit=1)[1]) == 1
    reads = record_reads(driver, monkeypatch)
    messages = driver.message_controller
    assert messages.get(queue, ids[-1], project)['body'] == 12
    messages.delete(queue, ids[-1], project)
    assert reads == []
    assert stats(driver, queue, project)['claimed'] == 12


def test_a_claim_hint_names_what_the_claim_holds(driver, make_queue,
                                                project):
    queue = kept_queue(make_queue, length=2)
    post(driver, queue, project, 0, 1, 2)
    claim_id, taken = claim(driver, queue, project, limit=2)
    qs = driver.queue_state(queue, project)

    def hinted():
        [hint] = driver.store.listing(qs.c, 'x/')
        assert names.parse_expiry(hint['name'])[1] == claim_id
        return names.hint_members(hint)

    held = hinted()
    assert sorted(held) == sorted(m['id'] for m in taken)
    assert held == {m[0]: m[1] for m in qs.claim_record(claim_id)['m']}
    # A renewal files the claim under its new expiry, naming the same.
    driver.claim_controller.update(queue, claim_id, {'ttl': 120},
                                   project)
    assert hinted() == held


def test_a_claim_larger_than_its_hint_names_is_read_from_its_record(
        driver, make_queue, project, monkeypatch):
    monkeypatch.setattr(names, 'HINT_MEMBERS', 1)
    queue = kept_queue(make_queue, length=2)
    post(driver, queue, project, 0, 1)
    assert len(claim(driver, queue, project, limit=2)[1]) == 2
    post(driver, queue, project, 2)
    reads = record_reads(driver, monkeypatch)
    # Both claimed messages are in flight, so not counted in length:
    # taken as not in flight, 1 and 2 would be the two kept and 0 gone.
    assert bodies(listed(driver, queue, project, include_claimed=True)) == [
        0, 1, 2]
    assert reads


def test_a_dropped_group_head_never_blocks_its_group(
        driver, clock, make_queue, project):
    queue = kept_queue(make_queue, grouped=True, length=2)
    post(driver, queue, project, {'g': 'a', 'n': 1})
    post(driver, queue, project, {'g': 'a', 'n': 2}, {'g': 'a', 'n': 3})
    # The head fell out: the claim removes it and takes the next member.
    assert bodies(claim(driver, queue, project)[1]) == [{'g': 'a', 'n': 2}]
    assert removed(driver, queue, project) == 1
    groups = list(next(driver.message_controller.list_groups(
        queue, project=project)))
    assert [(g['depth'], g['in_flight']) for g in groups] == [(2, True)]


def test_only_a_claim_that_finds_nothing_sweeps_further(
        driver, clock, make_queue, project):
    # x: 6 members beyond length; y's head is kept. A claim of two that
    # finds y removes no more than its `limit` of the dropped run; the
    # next, finding nothing else, removes the rest and takes x's first
    # kept member.
    queue = kept_queue(make_queue, grouped=True, length=3)
    post(driver, queue, project, *[{'g': 'x', 'n': n} for n in range(8)])
    post(driver, queue, project, {'g': 'y', 'n': 8})
    qs = driver.queue_state(queue, project)
    assert bodies(claim(driver, queue, project, limit=2)[1]) == [
        {'g': 'y', 'n': 8}]
    assert len(objects(driver, qs, 'p/')) == 9 - 2
    assert bodies(claim(driver, queue, project, limit=2)[1]) == [
        {'g': 'x', 'n': 6}]
    assert len(objects(driver, qs, 'p/')) == 3


def test_a_dropped_delayed_head_gives_way_to_the_next_member(
        driver, clock, make_queue, project):
    queue = make_queue({'_message_group_key': 'g',
                        '_default_message_delay': 60,
                        '_retention': {'time': 30}})
    post(driver, queue, project, {'g': 'a', 'n': 1})       # due in 60 s
    clock.advance(20)
    post(driver, queue, project, {'g': 'a', 'n': 2}, delay=0)
    assert claim(driver, queue, project)[1] == []          # head blocks
    clock.advance(10)                                      # head is 30 s old
    assert bodies(claim(driver, queue, project)[1]) == [{'g': 'a', 'n': 2}]
    assert removed(driver, queue, project) == 1


def test_two_cleaners_remove_and_count_each_message_once(
        driver, clock, make_queue, project, request):
    from localstack.factories import swift as factory
    from localstack import backends
    queue = kept_queue(make_queue, length=5)
    ids = []
    for start in range(0, 60, 20):
        ids += post(driver, queue, project, *range(start, start + 20))
    other = factory.make_driver(request, backends.make_conf())
    request.addfinalizer(other.close)
    other.use_clock(clock)
    counts = []
    cleaners = [threading.Thread(target=lambda d=d: counts.append(
        swift_retention.clean(d.queue_state(queue, project),
                              d.message_controller.retention_of(
                                  queue, project), clock(), 100)[0]))
                for d in (driver, other)]
    for cleaner in cleaners:
        cleaner.start()
    for cleaner in cleaners:
        cleaner.join()
    assert sum(counts) == 55
    assert removed(driver, queue, project) == 55
    qs = driver.queue_state(queue, project)
    assert len(objects(driver, qs, 'n/')) == 55
    assert bodies(listed(driver, queue, project)) == list(range(55, 60))


def test_a_removal_whose_node_died_is_finished_and_counted_once(
        driver, clock, make_queue, project):
    queue = kept_queue(make_queue, length=1)
    ids = post(driver, queue, project, 'a', 'b', 'c')
    qs = driver.queue_state(queue, project)
    # A remover won 'a' and wrote its tally, 'b' it only locked; then died.
    for mid in ids[:2]:
        assert driver.store.create(
            qs.c, names.lock_obj(mid, 1),
            content_type=names.content_type(c=names.RETAIN, t=clock()))
    swift_retention.tally(qs, clock(), ids[0])
    assert stats(driver, queue, project)['total'] == 1
    assert removed(driver, queue, project) == 1
    # Young locks may still be racing their winner's: left alone.
    assert clean(driver, queue, project) == 0
    # A lock's age comes from Swift's last_modified (real time): catch the
    # fake clock up with it first, as a slow machine may have taken longer
    # than FINISH_AFTER_S to get here.
    clock.now_ms = max(clock.now_ms, int(time.time() * 1000))
    clock.advance(swift_retention.FINISH_AFTER_S + 1)
    clean(driver, queue, project)
    assert removed(driver, queue, project) == 2
    assert len(objects(driver, qs, 'p/')) == 1
    clean(driver, queue, project)
    assert removed(driver, queue, project) == 2


def test_gc_finishes_an_abandoned_removal_and_counts_it(
        driver, clock, make_queue, project):
    queue = kept_queue(make_queue, length=1)
    ids = post(driver, queue, project, 'a', 'b')
    qs = driver.queue_state(queue, project)
    assert driver.store.create(
        qs.c, names.lock_obj(ids[0], 1),
        content_type=names.content_type(c=names.RETAIN, t=clock()))
    clock.advance(120)
    driver._gc_and_clean(qs.c)
    assert driver.store.head(qs.c, names.message_obj(ids[0])) is None
    assert removed(driver, queue, project) == 1


def test_gc_removes_what_retention_no_longer_keeps(driver, clock,
                                                   make_queue, project):
    queue = kept_queue(make_queue, length=2)
    post(driver, queue, project, *range(4))
    driver._gc_and_clean(names.container(names.MESSAGES, queue, project))
    assert removed(driver, queue, project) == 2
    qs = driver.queue_state(queue, project)
    assert len(objects(driver, qs, 'p/')) == 2


def test_a_retried_post_cannot_resurrect_a_removed_message(
        driver, clock, make_queue, project):
    """A post's PUT of m/ whose reply was lost is retried; if retention
    removed the message in between, the retry stores it again and files
    it. Its ret lock, left as a tombstone, keeps it from being handed
    out."""
    queue = kept_queue(make_queue, length=1)
    ids = post(driver, queue, project, 'a', 'b')
    qs = driver.queue_state(queue, project)
    headers, body = driver.store.get(qs.c, names.message_obj(ids[0]))
    assert clean(driver, queue, project) == 1
    # With 'b' in flight nothing else counts towards length: only the
    # stored cut hides 'a' now. Forget it, to see the ret lock do it.
    assert bodies(claim(driver, queue, project)[1]) == ['b']
    driver.store.delete_many(qs.c, objects(driver, qs, 'k/'))
    # The retried PUT lands, and the post files the message.
    assert driver.store.put(qs.c, names.message_obj(ids[0]), body,
                            content_type='application/json', headers={
                                'X-Object-Meta-E': headers['x-object-meta-e']},
                            exclusive=True)
    qs.make_available(json.loads(body)['p'], ids[0], 1, 0, clock())
    assert claim(driver, queue, project)[1] == []
    assert objects(driver, qs, 'a/') == []


def test_disabled_or_no_retention_removes_nothing(driver, clock, make_queue,
                                                  project):
    for metadata in ({'policy': 'disabled', 'length': 1}, {}):
        queue = kept_queue(make_queue, **metadata)
        post(driver, queue, project, 1, 2, 3)
        assert driver.message_controller.clean(queue, project, 10) == (
            0, False)
        assert stats(driver, queue, project)['total'] == 3
        assert removed(driver, queue, project) == 0


def test_a_cleanup_with_nothing_to_remove_does_not_grow_with_the_queue(
        driver, clock, make_queue, project, monkeypatch):
    # One small and one large queue, each retention policy set on both in
    # turn: filling a large Swift queue is what this test spends its time
    # on, so it is filled once, with ten times the small one's messages:
    # a request per message would show.
    small, large = (kept_queue(make_queue, length=500),
                    kept_queue(make_queue, length=500))
    post(driver, small, project, *range(10))
    post(driver, large, project, *range(100))
    requests = Requests(driver, monkeypatch)
    for retention in ({'length': 500}, {'time': 3600},
                      {'length': 500, 'time': 3600}):
        for queue in (small, large):
            driver.queue_controller.set_metadata(
                queue, {'_retention': retention}, project=project)
        assert requests.during(lambda: clean(driver, small, project)) == \
            requests.during(lambda: clean(driver, large, project)), \
            retention


def test_claims_never_list_what_retention_dropped(driver, clock, make_queue,
                                                  project, monkeypatch):
    queue = kept_queue(make_queue, length=2)
    post(driver, queue, project, *range(100))
    listed_names = []
    original = driver.store.listing

    def listing(container, prefix, *args, **kwargs):
        page = original(container, prefix, *args, **kwargs)
        if prefix == 'a/':
            listed_names.extend(e['name'] for e in page)
        return page

    monkeypatch.setattr(driver.store, 'listing', listing)
    assert bodies(claim(driver, queue, project)[1]) == [98, 99]
    assert len(listed_names) <= 2


def test_what_length_dropped_stays_gone_when_newer_messages_leave(
        driver, clock, make_queue, project):
    queue = kept_queue(make_queue, length=2)
    ids = post(driver, queue, project, 'a', 'b', 'c')
    assert bodies(listed(driver, queue, project)) == ['b', 'c']
    qs = driver.queue_state(queue, project)
    # The listing stored the cut it saw (b's position)...
    b_pos = driver.message_controller.get(queue, ids[1], project).position
    assert objects(driver, qs, 'k/') == [names.cut_obj(b_pos)]
    # ...so a stays gone after c is deleted (two messages are left).
    driver.message_controller.delete(queue, ids[2], project)
    assert bodies(listed(driver, queue, project)) == ['b']
    assert bodies(claim(driver, queue, project)[1]) == ['b']
    # gc keeps the highest cut only.
    post(driver, queue, project, 'd', 'e', 'f')
    assert len(listed(driver, queue, project)) == 2
    assert len(objects(driver, qs, 'k/')) == 2
    driver._gc_and_clean(qs.c)
    assert len(objects(driver, qs, 'k/')) == 1


def test_tallies_fold_into_one_total_and_are_never_counted_twice(
        driver, clock, make_queue, project):
    queue = kept_queue(make_queue, length=1)
    post(driver, queue, project, *range(6), ttl=3600)
    assert clean(driver, queue, project) == 5
    qs = driver.queue_state(queue, project)
    # Too young to fold: a removal that old may still be writing its tally.
    assert swift_retention.fold(qs, clock(), at_least=1) == 0
    clock.advance(swift_retention.FOLD_AGE_S + 1)
    # Two folders at once: one total wins.
    results = []
    folders = [threading.Thread(target=lambda: results.append(
        swift_retention.fold(qs, clock(), at_least=1))) for _ in range(2)]
    for folder in folders:
        folder.start()
    for folder in folders:
        folder.join()
    assert sorted(results) == [0, 5]
    assert objects(driver, qs, 'n/') == []
    assert objects(driver, qs, 't/') == [names.total_obj(1)]
    assert removed(driver, queue, project) == 5
    # A folder that died before deleting what it folded: still counted once.
    post(driver, queue, project, 6, 7, ttl=3600)
    assert clean(driver, queue, project) == 2
    clock.advance(swift_retention.FOLD_AGE_S + 1)
    tallies = objects(driver, qs, 'n/')
    total = swift_retention._newest_fold(qs)
    assert driver.store.create(qs.c, names.total_obj(2),
                               content_type=names.content_type(
                                   n=total[1] + 2, upto=tallies[-1]))
    assert removed(driver, queue, project) == 7
    assert swift_retention.fold(qs, clock(), at_least=1) == 0
    assert removed(driver, queue, project) == 7


def test_gc_folds_tallies(driver, clock, make_queue, project, monkeypatch):
    monkeypatch.setattr(swift_retention, 'FOLD_AT', 2)
    queue = kept_queue(make_queue, length=1)
    post(driver, queue, project, *range(4), ttl=3600)
    container = names.container(names.MESSAGES, queue, project)
    driver._gc_and_clean(container)
    clock.advance(swift_retention.FOLD_AGE_S + 1)
    driver._gc_and_clean(container)
    qs = driver.queue_state(queue, project)
    assert objects(driver, qs, 'n/') == []
    assert removed(driver, queue, project) == 3


def test_an_empty_claim_looks_past_ungrouped_dropped_messages(
        driver, clock, make_queue, project):
    # 150 dropped ungrouped messages, then x's dropped head and a kept
    # member: the claim's sweep reads past the ungrouped ones (left to the
    # cleanup) to x's head, removes it and takes x1.
    queue = kept_queue(make_queue, grouped=True, length=1)
    for start in range(0, 150, 50):
        post(driver, queue, project, *range(start, start + 50))
    post(driver, queue, project, {'g': 'x', 'n': 0}, {'g': 'x', 'n': 1})
    qs = driver.queue_state(queue, project)
    assert bodies(claim(driver, queue, project, limit=1)[1]) == [
        {'g': 'x', 'n': 1}]
    assert len(objects(driver, qs, 'p/')) == 151


def test_an_empty_claim_whose_sweep_fails_still_answers(
        driver, clock, make_queue, project, monkeypatch):
    # A Swift error in the sweep leaves the claim's empty answer standing.
    queue = kept_queue(make_queue, grouped=True, length=1)
    post(driver, queue, project, *[{'g': 'x', 'n': n} for n in range(3)])

    def unreachable(*args, **kwargs):
        raise errors.BackendUnavailable(backend='Swift', reason='test')

    # (The sweep before the claim's listing still runs: only the one
    # after an empty listing fails.)
    sweep = swift_retention.sweep_groups
    monkeypatch.setattr(swift_retention, 'sweep_groups',
                        lambda qs, keep, now, limit, *more: (
                            unreachable() if more else
                            sweep(qs, keep, now, limit)))
    assert claim(driver, queue, project, limit=1)[1] == []


def test_a_cleaner_racing_a_consumers_delete_does_not_count_it(
        driver, clock, make_queue, project, monkeypatch):
    """A consumer's delete runs as one bulk request, two objects at a
    time: the claimed message's lock can go before its m/. A cleaner
    that listed the message before it was claimed then finds no lock,
    sees m/, and wins a fresh lock 1; by the end of that lock's settle
    wait the consumer's delete has removed m/ too. Consumed, so not
    counted as removed by retention (it was, once: a multi-process test
    saw removed = 174 against 173 gone unconsumed)."""
    queue = kept_queue(make_queue, length=1)
    [consumed] = post(driver, queue, project, 'consumed')
    qs = driver.queue_state(queue, project)
    [fields] = [names.position_fields(e)
                for e in driver.store.listing_all(qs.c, 'p/')]
    claim_id, got = claim(driver, queue, project)
    assert [m['id'] for m in got] == [consumed]
    # The consumer's bulk delete, halfway: position and lock gone.
    driver.store.delete_many(qs.c, [names.position_obj(fields['pos']),
                                    names.lock_obj(consumed, 1)])
    real_wait = driver.store.settle_wait

    def delete_finishes_meanwhile(meanwhile=None):
        driver.store.delete_many(qs.c, [names.message_obj(consumed)])
        return real_wait(meanwhile)

    monkeypatch.setattr(driver.store, 'settle_wait',
                        delete_finishes_meanwhile)
    assert swift_retention.drop(qs, [fields], clock()) == (0, True)
    monkeypatch.undo()
    assert objects(driver, qs, 'n/') == []
    assert removed(driver, queue, project) == 0


def test_a_hint_naming_the_most_members_is_stored_and_listed_whole(
        driver, make_queue, project):
    """HINT_MEMBERS members of the longest ids ours and Zaqar's drivers
    make (36 characters) and 20-digit positions fit Swift's header and
    come back whole in the listing."""
    queue = make_queue()
    qs = driver.queue_state(queue, project)
    driver.store.put_container(qs.c, qs.meta)
    members = [[str(uuid.uuid4()), 10 ** 19 + n, 1, None, None]
               for n in range(names.HINT_MEMBERS)]
    record = {'e': driver.now_ms() + 60000, 'm': members}
    driver.claim_controller._put_hint(qs, 'claim-x', record)
    [hint] = driver.store.listing(qs.c, 'x/')
    assert names.hint_members(hint) == {m[0]: m[1] for m in members}
    record['m'].append([str(uuid.uuid4()), 1, 1, None, None])
    driver.claim_controller._put_hint(qs, 'claim-x', record)
    [hint] = driver.store.listing(qs.c, 'x/')
    assert names.hint_members(hint) is None


@pytest.mark.parametrize('retention', [{'time': 10}, {'length': 1}],
                         ids=['time', 'length'])
def test_cleanup_is_not_stalled_by_claimed_messages(
        driver, clock, make_queue, project, retention):
    """A cleanup step listed the first ``batch`` entries below the cut
    and only then left out the live claims' members: when those were all
    claimed it removed nothing and answered "no more", however many
    unclaimed dropped messages followed, for as long as the claims lived
    (renewed: for ever). It now lists past them."""
    first = {'length': 2} if 'length' in retention else retention
    queue = make_queue({'_retention': first})
    post(driver, queue, project, 'a', 'b', ttl=3600)
    _, got = claim(driver, queue, project, limit=2)
    assert bodies(got) == ['a', 'b']
    driver.queue_controller.set_metadata(queue, {'_retention': retention},
                                         project=project)
    post(driver, queue, project, 'c', ttl=3600)
    clock.advance(11)
    post(driver, queue, project, 'd', ttl=3600)       # kept either way
    # c is not kept and unclaimed: a batch of 2 must remove it.
    removed, _ = driver.message_controller.clean(queue, project, 2)
    assert removed == 1
    assert 'c' not in bodies(listed(driver, queue, project,
                                    include_claimed=True))
