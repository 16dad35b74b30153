"""Persistent consumers on Redis: layout, forward-only updates, expiry with
the subscription, read-by-all in the retention filter (exact at read time,
for good, removed by cleanup in bounded batches) and lag from indexes.

The behaviour every backend shares is in tests/contract/test_consumers.py;
these tests look at the Redis keys and the work each script does.
"""

import time
import uuid

import pytest

from localstack.factories import redis as redis_factory
from localstack.redis_server import RedisServer

from tests.consumer_helpers import (A, B, behind_a_delayed_run,
                                    consumer, make_queue, page,
                                    subscribe)
from tests.contract.helpers import bodies, claim, listed, post
from tests.redis.test_retention import key, raw  # noqa: F401 (a fixture)
from zaqar_delay import consumers
from zaqar_delay import errors
from zaqar_delay.drivers.redis import keys


def state_key(project, consume_id, queue='q'):
    return keys.queue_prefix(queue, project) + ':cons:' + consume_id


# -- layout ----------------------------------------------------------------

def test_state_hash_and_index_follow_the_subscription(driver, raw, project):
    make_queue(driver, project)
    sid = subscribe(driver, project, A)
    state = state_key(project, A)
    assert raw.zrange(key(project, 'consumers'), 0, -1) == [A.encode()]
    fields = raw.hgetall(state)
    assert (fields[b'c'], fields[b'h'], fields[b'l']) == (b'', b'', b'0')
    post(driver, 'q', project, 'a', 'b', 'c')
    got, marker = page(driver, project, A, limit=2)
    assert bodies(got) == ['a', 'b']
    assert raw.hget(state, 'h') == marker.encode()
    page(driver, project, A, marker=marker)
    assert raw.hget(state, 'c') == marker.encode()
    driver.subscription_controller.delete('q', sid, project=project)
    assert not raw.exists(state)
    assert raw.zcard(key(project, 'consumers')) == 0


def test_malformed_cursor_subscriber_stores_nothing(driver, raw, project):
    make_queue(driver, project)
    with pytest.raises(errors.InvalidInput, match='cursor:not-a-uuid'):
        driver.subscription_controller.create(
            'q', 'cursor:not-a-uuid', 3600, {}, project=project)
    subscribers = keys.subscription_keys('q', project)[1]
    assert not raw.exists(subscribers)
    assert raw.zcard(key(project, 'consumers')) == 0


def test_registering_twice_keeps_the_cursor(driver, project):
    make_queue(driver, project)
    subscribe(driver, project, A)
    post(driver, 'q', project, 'a', 'b')
    _, marker = page(driver, project, A, limit=1)
    page(driver, project, A, marker=marker)
    assert subscribe(driver, project, A) is None      # duplicate subscriber
    assert consumer(driver, project, A).cursor == int(marker)


# -- forward-only update ---------------------------------------------------

def test_update_moves_cursor_and_handed_forward_only(driver, project):
    make_queue(driver, project)
    subscribe(driver, project, A)
    update = driver.message_controller._consumer_update
    update('q', project, A, None, 10, 3)
    update('q', project, A, 7, None, 0)
    update('q', project, A, 5, 8, 4)          # behind: nothing moves back
    found = consumer(driver, project, A)
    assert (found.cursor, found.handed, found.lost) == (7, 10, 3)


def test_a_retried_update_counts_lost_once(driver, project):
    make_queue(driver, project)
    subscribe(driver, project, A)
    update = driver.message_controller._consumer_update
    update('q', project, A, None, 10, 3)
    update('q', project, A, None, 10, 3)      # same page again
    assert consumer(driver, project, A).lost == 3


def test_update_of_a_forgotten_consumer_stores_nothing(driver, raw,
                                                       project):
    make_queue(driver, project)
    driver.message_controller._consumer_update('q', project, A, 1, 2, 0)
    assert not raw.exists(state_key(project, A))


# -- expiry with the subscription ------------------------------------------

def test_expired_subscription_is_no_consumer(driver, raw, project, clock):
    make_queue(driver, project)
    sid = subscribe(driver, project, A)
    post(driver, 'q', project, 'a', 'b')
    page(driver, project, A, limit=1)
    # What Redis does when the subscription's ttl runs out.
    raw.delete(keys.subscription_key('q', project, sid))
    assert consumer(driver, project, A) is None
    assert driver.message_controller._consumers('q', project)[1] == []
    # A plain listing again: the Client-ID is no consumer any more.
    got, _ = page(driver, project, A, limit=10)
    assert bodies(got) == ['a', 'b']
    clock.advance(61)                         # past the registration grace
    driver.message_controller._consumers('q', project)
    assert not raw.exists(state_key(project, A))


def test_resubscribing_after_expiry_starts_afresh(driver, raw, project,
                                                  clock):
    make_queue(driver, project)
    sid = subscribe(driver, project, A)
    post(driver, 'q', project, 'a', 'b')
    _, marker = page(driver, project, A, limit=1)
    page(driver, project, A, marker=marker)
    raw.delete(keys.subscription_key('q', project, sid))
    clock.advance(61)
    subscribe(driver, project, A)
    found = consumer(driver, project, A)
    assert (found.cursor, found.handed, found.lost) == (None, None, 0)


def test_subscription_get_shows_the_report_list_does_not(driver, raw,
                                                          project, clock):
    make_queue(driver, project)
    sid = subscribe(driver, project, A)
    post(driver, 'q', project, 'a', 'b', 'c')
    _, marker = page(driver, project, A, limit=1)
    page(driver, project, A, marker=marker, limit=1)
    clock.advance(5)
    options = driver.subscription_controller.get(
        'q', sid, project=project)['options']
    assert options == {'cursor': marker, 'lag': 2, 'lost': 0,
                       'last_active_age': 5, 'idle': False}
    # The REST API's listing (with consumers): no report there either.
    raw.config_resetstat()
    listed_subs = list(next(driver.subscription_controller.list(
        'q', project=project, with_consumers=True)))
    assert listed_subs[0]['options'] == {}
    assert 'cmdstat_evalsha' not in raw.info('commandstats')


# -- lag --------------------------------------------------------------------

def test_lag_counts_claimed_and_kept_messages_after_the_cursor(driver,
                                                               project):
    make_queue(driver, project)
    post(driver, 'q', project, *range(6))
    claim(driver, 'q', project, limit=1)      # 0 claimed: kept
    driver.queue_controller.set_metadata(
        'q', {'_retention': {'length': 3}}, project=project)
    count = driver.message_controller._count_after
    retention = driver.message_controller.retention_of('q', project)
    # Kept: the claimed 0 and the newest three free ones (3, 4, 5).
    assert count('q', project, None, retention) == 4
    positions = [m.position for m in listed(driver, 'q', project,
                                            include_claimed=True)]
    assert count('q', project, positions[0], retention) == 3
    assert count('q', project, positions[-2], retention) == 1


# -- read-by-all ------------------------------------------------------------

def two_readers(driver, project, required=2):
    make_queue(driver, project, consumers_required=required)
    sids = [subscribe(driver, project, A), subscribe(driver, project, B)]
    ids = post(driver, 'q', project, *range(6))
    return sids, ids


def read_through(driver, project, consume_id, count):
    """The consumer reads and acknowledges its first ``count`` messages."""
    got, marker = page(driver, project, consume_id, limit=count)
    page(driver, project, consume_id, marker=marker, limit=1)
    return got


def test_read_by_all_is_exact_at_read_time_and_cleaned(driver, raw,
                                                       project):
    _, ids = two_readers(driver, project)
    read_through(driver, project, A, 4)
    read_through(driver, project, B, 2)
    assert bodies(listed(driver, 'q', project)) == [2, 3, 4, 5]
    assert driver.message_controller.clean('q', project, 100) == (2, False)
    assert raw.zrange(key(project, 'msgs'), 0, -1) == [
        i.encode() for i in ids[2:]]
    assert driver.message_controller.stats(
        'q', project)['retention']['removed'] == 2


def test_claimed_messages_read_by_all_stay_until_the_claim_ends(
        driver, project, clock):
    two_readers(driver, project)
    claim(driver, 'q', project, limit=1, ttl=60, grace=0)     # holds 0
    read_through(driver, project, A, 3)
    read_through(driver, project, B, 3)
    assert driver.message_controller.clean('q', project, 100)[0] == 2
    assert bodies(listed(driver, 'q', project, include_claimed=True)) == [
        0, 3, 4, 5]
    clock.advance(61)
    driver.gc()
    assert bodies(listed(driver, 'q', project, include_claimed=True)) == [
        3, 4, 5]


def test_read_by_all_is_for_good(driver, project):
    sids, _ = two_readers(driver, project)
    read_through(driver, project, A, 3)
    read_through(driver, project, B, 3)
    assert bodies(listed(driver, 'q', project)) == [3, 4, 5]
    # B goes: one consumer is fewer than required, read-by-all removes
    # nothing more, but what both had read stays gone.
    driver.subscription_controller.delete('q', sids[1], project=project)
    read_through(driver, project, A, 2)
    assert bodies(listed(driver, 'q', project)) == [3, 4, 5]
    assert driver.message_controller.clean('q', project, 100)[0] == 3


@pytest.mark.parametrize('required, kept', [(3, 6), (2, 4), (1, 4)])
def test_required_against_live_consumers(driver, project, required, kept):
    two_readers(driver, project, required=required)
    read_through(driver, project, A, 2)
    read_through(driver, project, B, 3)
    assert len(listed(driver, 'q', project)) == kept


def test_an_idle_consumer_stops_pinning(driver, project, clock):
    driver.conf.set_override('consumer_idle_time', 10, group='retention')
    idle = driver.message_controller._idle_s
    assert idle == 10
    two_readers(driver, project)
    read_through(driver, project, A, 1)
    clock.advance(idle - 1)
    read_through(driver, project, B, 4)
    # A is idle one second later: B alone is fewer than required...
    clock.advance(1)
    assert consumer(driver, project, A).is_idle(clock(), idle)
    assert len(listed(driver, 'q', project)) == 6
    # ...and with required 1, B's cursor alone decides.
    driver.queue_controller.set_metadata(
        'q', {'_retention': {'consumers_required': 1}}, project=project)
    assert bodies(listed(driver, 'q', project)) == [4, 5]


def test_every_message_read_without_consumers_leaves_later_posts(
        driver, project):
    make_queue(driver, project, consumers_required=0)
    post(driver, 'q', project, 'a', 'b')
    assert listed(driver, 'q', project) == []
    assert driver.message_controller.clean('q', project, 100)[0] == 2
    # A consumer registers: later posts wait for it; the floor stayed at
    # the last position there was.
    subscribe(driver, project, A)
    post(driver, 'q', project, 'c')
    assert bodies(listed(driver, 'q', project)) == ['c']
    got, _ = page(driver, project, A)
    assert bodies(got) == ['c']


def test_cleanup_of_read_messages_is_bounded_by_the_batch(driver, raw,
                                                          project):
    make_queue(driver, project, consumers_required=1)
    subscribe(driver, project, A)
    ids = []
    for start in range(0, 300, 100):
        ids += post(driver, 'q', project, *range(start, start + 100))
    read = int(raw.zscore(key(project, 'msgs'), ids[249]))
    update = driver.message_controller._consumer_update
    update('q', project, A, None, read, 0)
    update('q', project, A, read, None, 0)
    raw.config_resetstat()
    assert driver.message_controller.clean('q', project, 20) == (20, True)
    info = raw.info('commandstats')
    # One HMGET per message looked at (detach and the check), a few more
    # for the indexes: about the batch, not the 300 messages.
    assert info['cmdstat_hmget']['calls'] <= 3 * 20 + 5
    removed = 20
    while True:
        count, more = driver.message_controller.clean('q', project, 20)
        removed += count
        if not more:
            break
    assert removed == 250
    assert raw.zcard(key(project, 'msgs')) == 50


def test_a_deleted_queue_sets_its_consumers_back_to_the_start(driver,
                                                              project):
    make_queue(driver, project)
    subscribe(driver, project, A)
    post(driver, 'q', project, 'a', 'b', 'c')
    _, marker = page(driver, project, A, limit=3)
    page(driver, project, A, marker=marker)
    # What Zaqar's pipeline runs when the queue is deleted.
    driver.message_controller._purge_queue('q', project)
    post(driver, 'q', project, 'new')
    got, _ = page(driver, project, A)
    assert bodies(got) == ['new']


def test_a_page_read_before_a_deletion_skips_nothing_of_the_queue_again(
        driver, project, monkeypatch):
    """A consumer's page listed the queue, which was then deleted,
    created again and posted to before the page stored the consumer's
    cursor. Positions started again from 1, so the old cursor (3) was
    past the new queue's first three messages: the consumer skipped
    them."""
    make_queue(driver, project)
    subscribe(driver, project, A)
    post(driver, 'q', project, 'a', 'b', 'c')
    _, marker = page(driver, project, A, limit=3)
    messages = driver.message_controller
    update, again = messages._consumer_update, []

    def queue_created_again_first(*args):
        if not again:
            again.append(True)
            messages._purge_queue('q', project)
            post(driver, 'q', project, 'x', 'y', 'z', 'w')
        return update(*args)

    monkeypatch.setattr(messages, '_consumer_update',
                        queue_created_again_first)
    page(driver, project, A, marker=marker)
    monkeypatch.undo()
    got, _ = page(driver, project, A)
    assert bodies(got) == ['x', 'y', 'z', 'w']


MANY_CONSUMERS = 1000


def consumer_cursors(raw, project, ids):
    prefix = keys.queue_prefix('q', project) + ':cons:'
    return [raw.hget(prefix + cid, 'c') for cid in ids]


def test_two_deletions_of_a_queue_at_once_both_finish(driver, raw,
                                                      project):
    """A client sending its DELETE again while the first still ran: each
    purge call finding the other deletion's token started the consumer
    scan from 0 again, so with calls alternating neither finished."""
    make_queue(driver, project)
    for _ in range(MANY_CONSUMERS):
        driver.run_script('consumer_register', 'q', project,
                          str(uuid.uuid4()))
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    done = set()
    for _ in range(MANY_CONSUMERS // 25):
        for token in {first, second} - done:
            if not driver.run_script('purge', 'q', project, 100, token):
                done.add(token)
        if done == {first, second}:
            break
    assert done == {first, second}
    assert not raw.exists(keys.queue_prefix('q', project) + ':purgescan')


def test_deleting_a_queue_resets_its_consumers_a_batch_per_call(
        driver, raw, project):
    """Zaqar does not bound subscriptions: a queue deletion resets its
    consumers' cursors a batch per purge.lua call (it reset them all in
    its last call), and a deletion cut short midway lends the next one
    no scan cursor: every consumer is reset all the same."""
    make_queue(driver, project)
    post(driver, 'q', project, 'a')
    ids = [str(uuid.uuid4()) for _ in range(MANY_CONSUMERS)]
    for cid in ids:
        driver.run_script('consumer_register', 'q', project, cid)
    prefix = keys.queue_prefix('q', project) + ':cons:'

    def read_somewhere():
        for cid in ids:
            raw.hset(prefix + cid, mapping={'c': '5', 'h': '5'})

    read_somewhere()
    cut = str(uuid.uuid4())
    while raw.hget(keys.queue_prefix('q', project) + ':purgescan',
                   cut) is None:
        assert driver.run_script('purge', 'q', project, 100, cut)
    read_somewhere()
    hsets = []
    run = driver.scripts.run

    def counting(name, *args, **kwargs):
        before = raw.info('commandstats')['cmdstat_hset']['calls']
        result = run(name, *args, **kwargs)
        if name == 'purge':
            hsets.append(raw.info('commandstats')['cmdstat_hset']['calls']
                         - before)
        return result

    driver.scripts.run = counting
    try:
        driver.message_controller._purge_queue('q', project)
    finally:
        driver.scripts.run = run
    assert len(hsets) >= MANY_CONSUMERS // 200 and max(hsets) <= 200, hsets
    assert set(consumer_cursors(raw, project, ids)) == {b''}
    assert not raw.exists(keys.queue_prefix('q', project) + ':purgescan')


def test_the_cursor_survives_a_redis_restart(project):
    server = RedisServer(persistent=True).start()
    try:
        driver = redis_factory.driver_for(server.url)
        make_queue(driver, project)
        subscribe(driver, project, A)
        post(driver, 'q', project, *range(5))
        _, marker = page(driver, project, A, limit=2)
        page(driver, project, A, marker=marker, limit=1)
        driver.close()
        server.restart()
        driver = redis_factory.driver_for(server.url)
        got, _ = page(driver, project, A)
        assert bodies(got) == [2, 3, 4]
        driver.close()
    finally:
        server.stop()


# -- a page behind a hidden backlog ------------------------------------------

HIDDEN = 20000


@pytest.fixture
def script_calls(driver, monkeypatch):
    """{script name: calls} of every queue script the driver runs."""
    original, counted = driver.scripts.run, {}

    def counting(name, *args, **kwargs):
        counted[name] = counted.get(name, 0) + 1
        return original(name, *args, **kwargs)

    monkeypatch.setattr(driver.scripts, 'run', counting)
    return counted


def test_a_page_behind_a_hidden_backlog_starts_at_the_cutoff(
        driver, project, script_calls):
    # Retention keeps the newest five free messages; a new consumer's
    # first page holds them and the claimed message in the middle of what
    # retention hides, and reads nothing else: a fixed number of script
    # calls, not one per hundred hidden messages.
    make_queue(driver, project, length=1)
    for start in range(0, HIDDEN // 2, 100):
        post(driver, 'q', project, *range(start, start + 100))
    post(driver, 'q', project, 'held')
    assert bodies(claim(driver, 'q', project, limit=1, ttl=600)[1]) == [
        'held']
    driver.queue_controller.set_metadata(
        'q', {'_retention': {'length': 5}}, project=project)
    for start in range(HIDDEN // 2, HIDDEN, 100):
        post(driver, 'q', project, *range(start, start + 100))
    subscribe(driver, project, A)
    script_calls.clear()
    got, _ = page(driver, project, A)
    assert bodies(got) == ['held'] + list(range(HIDDEN - 5, HIDDEN))
    # The first list.lua call only answers that A is a consumer (Zaqar
    # names the client on every listing); two more list its page.
    assert script_calls['list'] <= 3, script_calls
    assert 'consumers' not in script_calls, script_calls
    assert sum(script_calls.values()) <= 8, script_calls
    assert consumer(driver, project, A).lost == 0


# -- read-by-all does not walk the consumers ---------------------------------

def commands_run(raw, run):
    """Commands Redis ran for ``run()`` (inside scripts too)."""
    raw.config_resetstat()
    run()
    stats = raw.info('commandstats')
    return sum(stat['calls'] for name, stat in stats.items()
               if name not in ('cmdstat_info', 'cmdstat_config'))


@pytest.mark.parametrize('idle', [False, True])
def test_a_claim_costs_the_same_with_5_or_200_consumers(driver, raw,
                                                        project, clock,
                                                        idle):
    # Read-by-all's count and lowest cursor come from indexes: a claim on
    # a queue with consumers_required runs as many commands whatever the
    # number of consumers, live or (once met) idle.
    driver.conf.set_override('consumer_idle_time', 10, group='retention')
    costs, kept = [], []
    for n, queue in ((5, 'few'), (200, 'many')):
        driver.queue_controller.create(queue, project=project, metadata={
            '_retention': {'consumers_required': 1}})
        post(driver, queue, project, *range(2 * n + 10))
        for k in range(n):
            consume_id = str(uuid.uuid4())
            driver.subscription_controller.create(
                queue, consumers.PREFIX + consume_id, 3600, {},
                project=project)
            pages = driver.message_controller.list(
                queue, project=project, limit=2, client_uuid=consume_id)
            next(pages)
            # Each acknowledges the first two messages.
            next(driver.message_controller.list(
                queue, project=project, limit=1, marker=next(pages),
                client_uuid=consume_id))
        if idle:
            clock.advance(11)
        claim(driver, queue, project, limit=1)
        costs.append(commands_run(
            raw, lambda: claim(driver, queue, project, limit=1)))
        kept.append(len(listed(driver, queue, project,
                               include_claimed=True)))
    assert costs[0] == costs[1], costs
    # Read-by-all still cut at the slowest live consumer (two messages
    # each), or, all of them idle, not at all.
    assert kept == ([2 * 5 + 10, 2 * 200 + 10] if idle else
                    [5 * 2 + 10 - 2, 200 * 2 + 10 - 2])


def test_consumers_from_before_the_indexes_are_filed(driver, raw, project):
    # Consumers registered by an earlier version have state and a
    # Q:consumers entry only: the first read-by-all files them, and cuts
    # exactly as it would have.
    two_readers(driver, project)
    read_through(driver, project, A, 4)
    read_through(driver, project, B, 2)
    prefix = keys.queue_prefix('q', project)
    raw.delete(*(prefix + suffix for suffix in (
        ':csubs', ':cpins', ':cseen', ':cindexed', ':readfloor')))
    assert bodies(listed(driver, 'q', project)) == [2, 3, 4, 5]
    assert raw.get(prefix + ':cindexed') == b'done'
    assert driver.message_controller.stats('q', project)['retention'][
        'consumers'] == {'live': 2, 'idle': 0}


def test_a_consumer_in_its_grace_repeats_no_other_in_the_listing(
        driver, project):
    """One registered without a subscription yet (a create in flight, in
    its 60 s grace) stays in the consumer index but is not listed: the
    next page started a rank early and listed the page's last consumer
    again (a page of 100 such would have made the listing loop)."""
    make_queue(driver, project)
    driver.message_controller._consumer_register(
        'q', project, '00000000-0000-4000-8000-000000000000')
    time.sleep(0.01)
    ids = [str(uuid.uuid4()) for _ in range(120)]
    for consume_id in ids:
        driver.subscription_controller.create(
            'q', consumers.PREFIX + consume_id, 3600, {}, project=project)
    _, found = driver.message_controller.list_consumers('q', project)
    assert sorted(c.consume_id for c in found) == sorted(ids)


@pytest.mark.parametrize('skew_s', [0, 600, -600])
def test_an_expired_subscription_stops_counting_whatever_the_api_clock(
        driver, project, monkeypatch, skew_s):
    """A subscription's hash expires on Redis' clock; its consumer was
    indexed for read-by-all until the expiry the API node computed, so a
    node 600 s ahead kept a consumer Redis had dropped counting as live
    (consumers_required met when it was not) for 600 s more."""
    from zaqar_delay.drivers.redis import subscriptions
    make_queue(driver, project)
    subscribe(driver, project, A)
    real_time = time.time
    monkeypatch.setattr(subscriptions.time, 'time',
                        lambda: real_time() + skew_s)
    subscribe(driver, project, B, ttl=1)
    monkeypatch.undo()
    assert driver.message_controller._live_readers('q', project)[0] == 2
    time.sleep(1.6)
    assert driver.message_controller._live_readers('q', project)[0] == 1


# -- work per poll -----------------------------------------------------------

def test_a_poll_behind_a_delayed_head_reads_about_a_page(driver, raw,
                                                         project, clock):
    """A consumer polling behind a delayed head gets an empty page (it
    stops before a message that is not due) and reads about a page of
    messages, not the delayed run behind the head: the poll repeats
    until the head is due, and its work must not grow with the queue."""
    behind_a_delayed_run(driver, project, 1000, 100)
    raw.config_resetstat()
    assert page(driver, project, A) == ([], None)
    stats = raw.info('commandstats')
    read = stats.get('cmdstat_hmget', {}).get('calls', 0)
    assert read <= 30, 'a poll read {} messages'.format(read)
    clock.advance(61)
    got, _ = page(driver, project, A, limit=5)
    assert bodies(got) == [0, 1, 2, 3, 4]
