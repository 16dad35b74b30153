"""Redis-specific retention: layout, exact reads over a hidden backlog,
bounded work per script, counting and tombstones.

Work is counted with ``INFO commandstats`` (never timed), as in
test_bounded.py. Retention is set through the tenant's ``_retention``
queue metadata (the operator's defaults remove nothing here).
"""

import json

import pytest
import redis as redis_py

from tests.contract.helpers import (CLIENT, bodies, claim, listed, post,
                                    stats)
from localstack.factories import redis as factories_redis
from zaqar_delay.drivers.redis import keys

BATCH = 100


@pytest.fixture
def raw(redis_url):
    return redis_py.Redis.from_url(redis_url)


def key(project, suffix, queue='q'):
    return dict(zip(keys.QUEUE_KEY_SUFFIXES,
                    keys.queue_keys(queue, project)))[suffix]


def kept_queue(driver, project, name='q', **retention):
    metadata = {'_retention': retention}
    if retention.pop('grouped', False):
        metadata['_message_group_key'] = 'g'
    driver.queue_controller.create(name, metadata=metadata, project=project)
    return name


def post_many(driver, project, count, queue='q', **extra):
    ids = []
    for start in range(0, count, 100):
        ids += post(driver, queue, project,
                    *range(start, min(count, start + 100)), **extra)
    return ids


def removed(driver, project, queue='q'):
    return driver.message_controller.stats(
        queue, project)['retention']['removed']


def counted_removals(raw, project):
    return int(raw.get(key(project, 'removed')) or 0)


def counted(raw, run, *commands):
    raw.config_resetstat()
    result = run()
    info = raw.info('commandstats')
    return result, sum(info.get('cmdstat_' + c, {}).get('calls', 0)
                       for c in commands)


# -- layout ----------------------------------------------------------------

def test_free_holds_the_unclaimed_messages_by_position(driver, raw,
                                                       project, clock):
    driver.queue_controller.create('q', project=project)
    ids = post(driver, 'q', project, 'a', 'b', 'c')
    free = key(project, 'free')

    def members():
        return [m.decode() for m in raw.zrange(free, 0, -1)]

    assert members() == ids
    claim_id, got = claim(driver, 'q', project, limit=1, ttl=60, grace=0)
    assert members() == ids[1:]
    driver.claim_controller.delete('q', claim_id, project=project)
    assert members() == ids
    claim(driver, 'q', project, limit=1, ttl=60, grace=0)
    clock.advance(61)
    driver.gc()                           # the claim ended: free again
    assert members() == ids
    driver.message_controller.delete('q', ids[1], project=project)
    assert members() == [ids[0], ids[2]]


def test_removal_is_counted_in_its_key_and_the_id_remembered(driver, raw,
                                                            project):
    kept_queue(driver, project, length=2)
    ids = post(driver, 'q', project, 'a', 'b', 'c')
    assert driver.message_controller.clean('q', project, 10) == (1, False)
    assert int(raw.get(key(project, 'removed'))) == 1
    assert raw.zscore(key(project, 'deleted'), ids[0]) is not None
    assert not raw.exists(keys.message_key('q', project, ids[0]))
    # A retried post of the removed message (same id) stores nothing.
    factories_redis.retried_post(driver, 'q', project, CLIENT.hex, ids[0],
                                 60, 0, json.dumps('a'), '', '', 0)
    assert bodies(listed(driver, 'q', project)) == ['b', 'c']
    assert removed(driver, project) == 1


def test_the_floor_keeps_a_message_beyond_length_out_for_good(
        driver, raw, project, monkeypatch):
    kept_queue(driver, project, length=2)
    ids = post(driver, 'q', project, 'a', 'b', 'c')
    # A listing (which removes nothing) finds 'a' beyond length and
    # remembers where that starts.
    assert bodies(listed(driver, 'q', project)) == ['b', 'c']
    assert raw.zscore(key(project, 'free'), ids[0]) is not None
    floor = int(raw.get(key(project, 'floor')))
    assert floor == int(raw.zscore(key(project, 'free'), ids[1]))
    driver.message_controller.bulk_delete('q', ids[1:], project=project)
    assert listed(driver, 'q', project) == []
    assert list(driver.message_controller.bulk_get('q', ids[:1],
                                                   project=project)) == []
    assert claim(driver, 'q', project)[1] == []
    assert removed(driver, project) == 1


def test_queue_deletion_forgets_the_count(driver, raw, project):
    kept_queue(driver, project, length=1)
    post(driver, 'q', project, 'a', 'b')
    driver.message_controller.clean('q', project, 10)
    # What the queue stage runs when Zaqar deletes the queue.
    driver.message_controller._purge_queue('q', project)
    assert not raw.exists(key(project, 'removed'), key(project, 'free'),
                          key(project, 'floor'))


# -- exact reads over a backlog that retention hides -------------------------

def test_reads_leave_out_a_backlog_larger_than_any_batch(driver, project):
    kept_queue(driver, project, length=5)
    ids = post_many(driver, project, 1000)
    newest = list(range(995, 1000))
    assert bodies(listed(driver, 'q', project)) == newest
    assert driver.message_controller.first('q', project)['body'] == 995
    assert [m['body'] for m in driver.message_controller.bulk_get(
        'q', [ids[0], ids[994], ids[995]], project=project)] == [995]
    counts = stats(driver, 'q', project)
    assert (counts['total'], counts['free']) == (5, 5)
    assert counts['oldest']['id'] == ids[995]
    # The claim is not blocked by the 995 hidden ones before them.
    assert bodies(claim(driver, 'q', project, limit=2)[1]) == [995, 996]


def test_time_hides_the_oldest_by_bisection(driver, raw, project, clock):
    kept_queue(driver, project, time=60)
    old = post_many(driver, project, 500)
    clock.advance(30)
    young = post(driver, 'q', project, 'young')
    clock.advance(30)                       # the 500 are exactly 60 s old
    page, reads = counted(raw, lambda: listed(driver, 'q', project),
                          'hget')
    assert bodies(page) == ['young']
    # Two listing calls, each bisecting 501 entries: about 10 reads each.
    assert reads <= 24, reads
    counts = stats(driver, 'q', project)
    assert counts['total'] == 1 and counts['oldest']['id'] == young[0]
    assert driver.message_controller.bulk_get('q', old[:3],
                                              project=project) is not None
    assert list(driver.message_controller.bulk_get(
        'q', old[:3], project=project)) == []
    assert bodies(claim(driver, 'q', project)[1]) == ['young']


def test_a_claimed_message_is_kept_until_its_claim_ends(driver, project,
                                                       clock):
    kept_queue(driver, project, length=1)
    ids = post(driver, 'q', project, 'a')
    claim_id, _ = claim(driver, 'q', project, limit=1, ttl=60, grace=0)
    post(driver, 'q', project, 'b', 'c')
    # In flight: not counted by length, and never removed.
    assert driver.message_controller.clean('q', project, 10) == (1, False)
    assert bodies(listed(driver, 'q', project, include_claimed=True)) == [
        'a', 'c']
    assert driver.message_controller.get('q', ids[0], project=project)
    clock.advance(61)
    # Its claim ended: judged like any other, it is the oldest of two.
    assert bodies(listed(driver, 'q', project, include_claimed=True)) == [
        'c']
    assert driver.message_controller.clean('q', project, 10) == (1, False)
    assert removed(driver, project) == 2


def test_a_dropped_head_unblocks_its_group(driver, project, clock):
    kept_queue(driver, project, length=2, grouped=True)
    post(driver, 'q', project, {'g': 'x', 'n': 0}, delay=0)
    post(driver, 'q', project, {'g': 'x', 'n': 1}, {'g': 'y', 'n': 2},
         {'g': 'x', 'n': 3})
    # x's head (n 0) is beyond length; the claim removes it and hands out
    # the next members in order, one per group.
    assert bodies(claim(driver, 'q', project)[1]) == [{'g': 'y', 'n': 2},
                                                     {'g': 'x', 'n': 3}]
    assert removed(driver, project) == 2


def test_a_delayed_hidden_head_does_not_block_its_group(driver, project):
    kept_queue(driver, project, length=1, grouped=True)
    post(driver, 'q', project, {'g': 'x', 'n': 0}, delay=600)
    post(driver, 'q', project, {'g': 'x', 'n': 1})
    assert bodies(claim(driver, 'q', project)[1]) == [{'g': 'x', 'n': 1}]


def test_disabled_policy_removes_nothing(driver, project):
    driver.queue_controller.create(
        'q', metadata={'_retention': {'policy': 'disabled', 'length': 1}},
        project=project)
    post(driver, 'q', project, 'a', 'b')
    assert driver.message_controller.clean('q', project, 10) == (0, False)
    assert bodies(listed(driver, 'q', project)) == ['a', 'b']


# -- bounded work -----------------------------------------------------------

@pytest.mark.parametrize('size', [50, 2000])
def test_a_cleanup_step_with_nothing_to_remove_reads_no_messages(
        driver, raw, project, size):
    kept_queue(driver, project, length=size, time=3600)
    post_many(driver, project, size)
    result, reads = counted(
        raw, lambda: driver.message_controller.clean('q', project, 1000),
        'hget', 'hmget', 'zrange', 'zrevrange', 'zrangebyscore', 'del')
    assert result == (0, False)
    # The queue's metadata (Zaqar's control store, on this Redis too), one
    # rank, the oldest free message and its fields, one probe of the
    # deleted ids: the same 5 commands at 50 as at 2000 messages.
    assert reads <= 5, reads


def test_cleanup_removes_a_backlog_in_bounded_counted_batches(
        driver, raw, project, monkeypatch):
    kept_queue(driver, project, length=10)
    post_many(driver, project, 1010)
    steps = []
    run = driver.run_script

    def recording(name, queue, of, *args, **kwargs):
        result = run(name, queue, of, *args, **kwargs)
        if name == 'clean':
            steps.append(result[0])
        return result

    monkeypatch.setattr(driver.message_controller, '_run', recording)
    # With the default tuples_per_iteration (1000): one cleanup batch, but
    # no script call removes more than BATCH.
    assert driver.clean_queue('q', project) == 1000
    assert max(steps) == BATCH and sum(steps) == 1000
    assert removed(driver, project) == 1000
    assert bodies(listed(driver, 'q', project)) == list(range(1000, 1010))


def test_a_claim_on_a_grouped_queue_removes_at_most_its_limit(
        driver, raw, project):
    kept_queue(driver, project, length=10, grouped=True)
    for start in range(0, 1000, 100):
        post(driver, 'q', project, *[{'g': n} for n in range(start,
                                                            start + 100)])
    (_, got), deletes = counted(
        raw, lambda: claim(driver, 'q', project, limit=5), 'del')
    assert [m['body']['g'] for m in got] == list(range(990, 995))
    assert deletes <= 5
    assert int(raw.get(key(project, 'removed'))) == 5


def test_a_short_claim_retires_at_most_a_batch_behind_hidden_heads(
        driver, raw, project):
    # 250 members of group x beyond length, then 3 kept. A claim that
    # comes back short retires up to BATCH hidden heads and the dropped
    # members behind them (after trimming its `limit`), then looks again.
    # (Read from its key: stats would remove a batch first.)
    kept_queue(driver, project, length=3, grouped=True)
    for start in range(0, 250, 50):
        post(driver, 'q', project, *[{'g': 'x', 'n': n}
                                     for n in range(start, start + 50)])
    post(driver, 'q', project, *[{'g': 'x', 'n': n}
                                 for n in range(250, 253)])
    (_, got), deletes = counted(
        raw, lambda: claim(driver, 'q', project, limit=1), 'del')
    assert got == [] and counted_removals(raw, project) == 1 + BATCH
    assert deletes <= 1 + BATCH + 2, deletes
    assert claim(driver, 'q', project, limit=1)[1] == []
    assert counted_removals(raw, project) == 2 * (1 + BATCH)
    # The rest of the run (48) goes in the third, which then hands out
    # the first kept member.
    claim_id, got = claim(driver, 'q', project, limit=1)
    assert [m['body']['n'] for m in got] == [250]
    assert counted_removals(raw, project) == 250


def test_a_claim_that_fills_up_retires_nothing_behind_hidden_heads(
        driver, raw, project):
    # Another group has a kept head: the claim is not short, so the
    # dropped run of x waits for trim and the cleanup, as before.
    kept_queue(driver, project, length=3, grouped=True)
    post(driver, 'q', project, *[{'g': 'x', 'n': n} for n in range(20)])
    post(driver, 'q', project, {'g': 'y', 'n': 20})
    got = claim(driver, 'q', project, limit=1)[1]
    assert [m['body']['n'] for m in got] == [20]
    assert counted_removals(raw, project) == 1


def test_a_claim_on_an_ungrouped_queue_leaves_removal_to_cleanup(
        driver, raw, project):
    kept_queue(driver, project, length=10)
    post_many(driver, project, 1000)
    (_, got), deletes = counted(
        raw, lambda: claim(driver, 'q', project, limit=5), 'del')
    assert bodies(got) == list(range(990, 995))
    assert deletes == 0 and raw.get(key(project, 'removed')) is None


def test_gc_cleans_every_queue(driver, project):
    for name in ('a', 'b'):
        kept_queue(driver, project, name=name, length=1)
        post(driver, name, project, 'old', 'new')
    driver.gc()
    for name in ('a', 'b'):
        assert removed(driver, project, name) == 1
        assert driver.message_controller.stats(
            name, project)['messages']['total'] == 1


def test_gc_isolates_a_queue_whose_cleanup_fails(driver, project,
                                                 monkeypatch):
    for name in ('a', 'b'):
        kept_queue(driver, project, name=name, length=1)
        post(driver, name, project, 'old', 'new')
    clean = driver.message_controller.clean

    def failing(queue, of, batch):
        if queue == 'a':
            raise RuntimeError('boom')
        return clean(queue, of, batch)

    monkeypatch.setattr(driver.message_controller, 'clean', failing)
    driver.gc()
    assert removed(driver, project, 'b') == 1


def test_a_cleanup_batch_bounds_what_it_looks_at(driver, project, clock,
                                                 monkeypatch):
    """Expired messages a cleanup step drops on the way are not removals:
    one clean of a batch of 100 made one clean.lua call per 100 of them
    until their run ended (1,000 here: 11 calls), inside one step of
    gc's visit (VISIT_STEPS counts clean calls)."""
    driver.queue_controller.create('q', metadata={
        '_retention': {'time': 3600}}, project=project)
    for start in range(0, 1000, 100):
        post(driver, 'q', project, *range(start, start + 100), ttl=60)
    clock.advance(120)
    calls, run = [], driver.message_controller._run

    def counted(script, *args, **kwargs):
        if script == 'clean':
            calls.append(script)
        return run(script, *args, **kwargs)

    monkeypatch.setattr(driver.message_controller, '_run', counted)
    driver.message_controller.clean('q', project, 100)
    assert len(calls) == 1, calls


def test_a_claim_of_one_hands_out_a_kept_message_behind_ended_claims(
        driver, project, clock):
    """Every ended claim not settled yet counts as newer than each free
    message (hide_below), so as many of them as `length` hide the whole
    queue; a claim of 1 settled only 2 of the 20 first and answered empty
    while retention kept 10 claimable messages."""
    driver.queue_controller.create(
        'q', metadata={'_retention': {'length': 10}}, project=project)
    for _ in range(2):      # 20 claimed: the 10 kept, twice
        post_many(driver, project, 10, ttl=3600)
        assert len(claim(driver, 'q', project, limit=10, ttl=60,
                         grace=60)[1]) == 10
    clock.advance(61)          # every claim ended, none settled yet
    _, got = claim(driver, 'q', project, limit=1)
    assert len(got) == 1


def test_zaqars_purge_pops_past_ended_claims_under_length_retention(
        driver, project, clock):
    """The same through Zaqar's queue purge (pops of 100 until one is
    empty): with more ended claims unsettled than a pop settles, its
    first pop was empty and the purge stopped, leaving every message."""
    from tests.contract.helpers import zaqar_purge
    driver.queue_controller.create(
        'q', metadata={'_retention': {'length': 10}}, project=project)
    for _ in range(30):     # 300 claimed: the 10 kept, 30 times
        post_many(driver, project, 10, ttl=3600)
        assert len(claim(driver, 'q', project, limit=10, ttl=60,
                         grace=60)[1]) == 10
    clock.advance(61)
    zaqar_purge(driver, 'q', project)
    assert listed(driver, 'q', project) == []

