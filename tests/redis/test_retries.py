"""Redis: a call retried after a lost reply has the effect of one call.

``lose_next_reply`` makes the next script call run in Redis and then fail
with a ConnectionError, as when a reply is lost or the socket times out
while Redis is busy; the driver's one retry policy (connection.guarded)
then runs it again. (On a Redis Cluster a post registers its queue first,
in a call of its own: the lost reply is the post script's.) Optionally
something happens in between, as another consumer's work would.
"""

import logging
import time
import types
import uuid

import pytest
import redis as redis_py
from zaqar.storage import errors as storage_errors

from tests.contract.helpers import claim, listed, post, stats
from localstack import backends
from localstack.factories import redis as factories_redis
from zaqar_delay import consumers
from zaqar_delay import errors
from zaqar_delay.drivers.redis import connection
from zaqar_delay.drivers.redis import driver as redis_driver
from zaqar_delay.drivers.redis import keys


@pytest.fixture
def raw(redis_url):
    return redis_py.Redis.from_url(redis_url)


@pytest.fixture
def lose_next_reply(driver, conf, monkeypatch):
    # The driver took its options when it was built: set them on it.
    monkeypatch.setattr(driver.store_conf, 'reconnect_sleep', 0.0)
    original = driver.scripts.run
    armed = []

    def lossy(*args, **kwargs):
        result = original(*args, **kwargs)
        # The queue's metadata copy is not the call under test.
        if armed and args[0] not in ('meta_read', 'meta_fill',
                                     'meta_forget'):
            between = armed.pop()
            between()
            raise redis_py.exceptions.ConnectionError('reply lost')
        return result

    monkeypatch.setattr(driver.scripts, 'run', lossy)

    def arm(between=lambda: None):
        armed.append(between)
    return arm


def test_a_post_retried_after_a_metadata_change_stores_it_once(
        driver, conf, redis_url, project, lose_next_reply):
    # The first attempt passed its generation check and stored; its reply
    # was lost and the metadata changed before the retry. The retry must
    # not check the generation again (it would answer "stale", and the
    # post would run again with new ids): it finds its ids stored.
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'warm-up')
    listed(driver, 'q', project)
    other = redis_driver.DataDriver(
        conf, None, backends.control_driver(conf, redis_url))
    lose_next_reply(lambda: other.queue_controller.set_metadata(
        'q', {'_default_message_delay': 600}, project=project))
    post(driver, 'q', project, 'once')
    assert [m['body'] for m in listed(driver, 'q', project,
                                      include_delayed=True)] == [
        'warm-up', 'once']


def test_a_retried_pop_returns_the_batch_it_took(driver, project,
                                                 lose_next_reply):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a', 'b', 'c', 'd', 'e')
    lose_next_reply()
    popped = driver.message_controller.pop('q', 2, project=project)
    assert [m['body'] for m in popped] == ['a', 'b']
    assert [m['body'] for m in listed(driver, 'q', project)] == [
        'c', 'd', 'e']


def test_a_retried_claim_returns_the_batch_it_took(driver, project,
                                                   lose_next_reply):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a', 'b', 'c', 'd')
    lose_next_reply()
    claim_id, messages = claim(driver, 'q', project, limit=2)
    check_one_batch_of_two_taken(driver, project, claim_id, messages)


def check_one_batch_of_two_taken(driver, project, claim_id, messages):
    """Of a, b, c, d on queue ``q``, a retried claim of 2 took a and b
    once, under ``claim_id``, and left c and d untouched."""
    assert [(m['body'], m['claim_count']) for m in messages] == [
        ('a', 1), ('b', 1)]
    _, held = driver.claim_controller.get('q', claim_id, project=project)
    assert sorted(m['body'] for m in held) == ['a', 'b']
    # The rest was not touched: it is claimable, never claimed before.
    _, rest = claim(driver, 'q', project, limit=10)
    assert [(m['body'], m['claim_count']) for m in rest] == [
        ('c', 1), ('d', 1)]


def test_a_retried_claim_does_not_spend_an_attempt(driver, project, clock,
                                                   lose_next_reply):
    driver.queue_controller.create('dlq', project=project)
    driver.queue_controller.create('q', project=project, metadata={
        '_max_claim_count': 1, '_dead_letter_queue': 'dlq'})
    post(driver, 'q', project, 'once')
    lose_next_reply()
    _, messages = claim(driver, 'q', project, limit=1, ttl=60)
    # Delivered once, under the claim the caller got back.
    assert [m['body'] for m in messages] == ['once']
    assert listed(driver, 'dlq', project) == []


def test_a_retried_claim_whose_claim_ended_hands_out_nothing(
        driver, project, clock, lose_next_reply):
    # The reply is lost and the retry comes after the claim's ttl: the
    # batch is no longer the caller's (others may claim it, or it went to
    # the dead-letter queue), so the retry returns none of it.
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a', 'b')
    lose_next_reply(lambda: clock.advance(31))
    _, messages = claim(driver, 'q', project, limit=2, ttl=30)
    assert messages == []
    _, again = claim(driver, 'q', project, limit=10)
    assert [(m['body'], m['claim_count']) for m in again] == [
        ('a', 2), ('b', 2)]


def test_a_retried_post_does_not_restore_a_deleted_message(
        driver, project, lose_next_reply):
    driver.queue_controller.create('q', project=project)

    def consumer_deletes_it():
        for message in driver.message_controller.pop('q', 10,
                                                     project=project):
            assert message['body'] == 'once'

    lose_next_reply(consumer_deletes_it)
    post(driver, 'q', project, 'once')
    assert listed(driver, 'q', project, include_claimed=True) == []


@pytest.mark.parametrize('how', ['delete', 'bulk_delete', 'pop'])
def test_every_delete_is_remembered_for_a_retried_post(driver, project, how):
    driver.queue_controller.create('q', project=project)
    mid = post(driver, 'q', project, 'once')[0]
    messages = driver.message_controller
    if how == 'delete':
        messages.delete('q', mid, project=project)
    elif how == 'bulk_delete':
        messages.bulk_delete('q', [mid], project=project)
    else:
        messages.pop('q', 1, project=project)
    factories_redis.retried_post(driver, 'q', project, 'client', mid, 60, 0,
                                 '"once"', '', '', 0)
    assert listed(driver, 'q', project, include_claimed=True) == []


def test_a_purged_group_is_remembered_for_a_retried_post(driver, project):
    driver.queue_controller.create('q', project=project, metadata={
        '_message_group_key': 'g'})
    mid = post(driver, 'q', project, {'g': 'a'})[0]
    assert driver.message_controller.purge_group('q', 'a',
                                                 project=project) == 1
    # The post's reply was lost before the purge; its retry comes now.
    factories_redis.retried_post(driver, 'q', project, 'client', mid, 60, 0,
                                 '{"g":"a"}', '"a"', '', 0)
    assert listed(driver, 'q', project, include_claimed=True) == []


def poison_due(driver, project, clock):
    """Queue 'q' holding 'poison', claimed once already and due again:
    the next claim or pop dead-letters it into 'dlq'."""
    driver.queue_controller.create('dlq', project=project)
    driver.queue_controller.create('q', project=project, metadata={
        '_max_claim_count': 1, '_dead_letter_queue': 'dlq'})
    post(driver, 'q', project, 'poison')
    claim(driver, 'q', project, ttl=60)
    clock.advance(60)


def dying_before_outbox_done(driver, monkeypatch, call):
    """``call()`` on a node that dies before the outbox forgets what the
    call copied out (gc copies it again)."""
    original = driver.run_script

    def dies_before_outbox_done(name, *args, **kwargs):
        if name == 'outbox_done':
            raise SystemExit('API node died')
        return original(name, *args, **kwargs)

    monkeypatch.setattr(driver, 'run_script', dies_before_outbox_done)
    with pytest.raises(SystemExit):
        call()
    monkeypatch.setattr(driver, 'run_script', original)


def claim_dying_before_outbox_done(driver, project, monkeypatch):
    """A claim on 'q' that dead-letters, on a node that dies before the
    outbox forgets the copy."""
    dying_before_outbox_done(driver, monkeypatch,
                             lambda: claim(driver, 'q', project))


def test_gc_does_not_copy_again_a_dead_letter_its_consumer_deleted(
        driver, project, clock, monkeypatch):
    poison_due(driver, project, clock)
    claim_dying_before_outbox_done(driver, project, monkeypatch)
    # The copy reached the dead-letter queue; its consumer deletes it.
    assert [m['body'] for m in
            driver.message_controller.pop('dlq', 10, project=project)] == [
        'poison']
    clock.advance(61)
    driver.gc()
    assert listed(driver, 'dlq', project, include_claimed=True) == []
    assert listed(driver, 'q', project, include_claimed=True) == []


def test_a_pop_keeps_its_batch_when_its_dead_letters_cannot_move(
        driver, project, clock, monkeypatch):
    # The pop's script took 'fresh' and detached 'poison' into the outbox;
    # then the copy to the dead-letter queue fails (its Redis, or the
    # registry's master on a cluster, unreachable).
    poison_due(driver, project, clock)
    post(driver, 'q', project, 'fresh')
    messages = driver.message_controller

    def unreachable(*args, **kwargs):
        raise errors.BackendUnavailable()

    monkeypatch.setattr(messages, '_insert', unreachable)
    assert [m['body'] for m in messages.pop('q', 5, project=project)] == [
        'fresh']
    monkeypatch.undo()
    assert listed(driver, 'dlq', project) == []
    clock.advance(redis_driver.GC_OUTBOX_AGE_MS / 1000 + 1)
    driver.gc()
    assert [m['body'] for m in listed(driver, 'dlq', project)] == ['poison']
    assert listed(driver, 'q', project, include_claimed=True) == []


def test_deleted_ids_are_forgotten_after_their_memory(driver, raw, project,
                                                      clock):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, *range(30))
    driver.message_controller.pop('q', 20, project=project)
    deleted = keys.queue_prefix('q', project) + ':deleted'
    assert raw.zcard(deleted) == 20
    clock.advance(driver.store_conf.deleted_id_memory - 1)
    driver.gc()
    assert raw.zcard(deleted) == 20
    clock.advance(2)
    driver.gc()
    assert raw.zcard(deleted) == 0


def assert_forgotten_after_their_memory(driver, raw, clock, project, kind,
                                        remembered):
    """``remembered`` ids in queue q's set ``kind``, and none after one
    gc once their memory passed."""
    ids = qkey('q', project, kind)
    assert raw.zcard(ids) == remembered
    clock.advance(driver.store_conf.deleted_id_memory + 1)
    driver.gc()
    assert raw.zcard(ids) == 0


def test_ids_buried_by_stats_trims_are_forgotten_after_their_memory(
        driver, raw, project, clock):
    """A stats call removes up to 100 messages retention no longer keeps,
    remembering each id, and forgets none; gc forgot 50 per queue visit
    and did not go on for them, so a tenant calling stats remembered ids
    long past their memory, without bound."""
    driver.queue_controller.create(
        'q', metadata={'_retention': {'length': 1}}, project=project)
    post_many(driver, 'q', project, 1000, ttl=3600)
    for _ in range(10):
        stats(driver, 'q', project)
    assert_forgotten_after_their_memory(driver, raw, clock, project,
                                        'deleted', 999)


def test_ids_buried_by_a_group_purge_are_forgotten_after_their_memory(
        driver, raw, project, clock):
    """A group's purge remembers up to 100 ids per step and forgets
    none (gc does)."""
    driver.queue_controller.create(
        'q', metadata={'_message_group_key': 'g'}, project=project)
    for start in range(0, 500, 100):
        post(driver, 'q', project,
             *[{'g': 'big', 'n': n} for n in range(start, start + 100)])
    assert driver.message_controller.purge_group(
        'q', 'big', project=project) == 500
    assert_forgotten_after_their_memory(driver, raw, clock, project,
                                        'deleted', 500)


def test_ids_dead_lettered_are_forgotten_after_their_memory(
        driver, raw, project, clock):
    """A claim remembers each message it dead-letters (Q:movedout), up
    to 2 * limit + 100 of them, and forgets about twice what it handed
    out (gc forgets the rest)."""
    driver.queue_controller.create(
        'q', metadata={'_max_claim_count': 1, '_dead_letter_queue': 'dlq'},
        project=project)
    driver.queue_controller.create('dlq', project=project)
    post_many(driver, 'q', project, 500, ttl=3600)
    # Claim each once, then let the claims lapse.
    while claim(driver, 'q', project, limit=10, ttl=60)[1]:
        pass
    clock.advance(61)
    while claim(driver, 'q', project, limit=1, ttl=60)[1] or \
            raw.zcard(qkey('q', project, 'msgs')):
        pass
    assert_forgotten_after_their_memory(driver, raw, clock, project,
                                        'movedout', 500)


def test_a_claim_result_is_kept_only_for_the_retry_span(driver, raw,
                                                       project):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a')
    claim_id, _ = claim(driver, 'q', project)
    result_key = keys.queue_prefix('q', project) + ':r:' + claim_id
    assert 0 < raw.pttl(result_key) <= driver.retry_span_ms
    # An empty claim keeps nothing.
    assert claim(driver, 'q', project) == (None, [])
    kept = raw.keys(keys.queue_prefix('q', project).replace('{', '\\{')
                    .replace('}', '\\}') + ':r:*')
    assert [k.decode() for k in kept] == [result_key]


def test_redis_py_does_not_retry_on_its_own(driver):
    assert driver.connection.get_retry().get_retries() == 0


def test_a_post_racing_queue_deletion_stays_known_to_gc(
        driver, raw, project, clock, monkeypatch):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'before')
    original = driver.unregister_queue

    def post_lands_first(queue, project):
        # The post's script and registration both land after the last
        # purge call, just before the purge unregisters the queue.
        post(driver, 'q', project, 'racing', ttl=60)
        original(queue, project)

    monkeypatch.setattr(driver, 'unregister_queue', post_lands_first)
    driver.message_controller._purge_queue('q', project)
    tag = keys.queue_tag('q', project).encode()
    assert raw.sismember(keys.QUEUE_REGISTRY, tag)
    clock.advance(61)
    assert driver.gc().expired >= 1
    assert raw.exists(keys.queue_prefix('q', project) + ':msgs') == 0


def test_a_post_racing_queue_deletion_from_its_start_stays_known_to_gc(
        driver, raw, project, clock, monkeypatch):
    # On a cluster (the registry in another slot than the queue) the post
    # registers the queue, then the whole deletion runs (purge, unregister,
    # nothing left to keep registered), then the post's script stores into
    # the emptied queue: the post must register it again.
    monkeypatch.setattr(redis_driver.DataDriver, 'on_cluster', True)
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'before')
    original = driver.register_queue
    purges = [driver.message_controller._purge_queue]

    def deletion_runs_in_between(queue, project):
        original(queue, project)
        if purges:
            purges.pop()(queue, project)

    monkeypatch.setattr(driver, 'register_queue', deletion_runs_in_between)
    post(driver, 'q', project, 'racing', ttl=60)
    tag = keys.queue_tag('q', project).encode()
    assert raw.sismember(keys.QUEUE_REGISTRY, tag)
    assert [m['body'] for m in listed(driver, 'q', project)] == ['racing']
    clock.advance(61)
    assert driver.gc().expired >= 1
    assert raw.exists(keys.queue_prefix('q', project) + ':msgs') == 0


def test_the_health_report_says_whether_aof_is_on(driver, raw):
    assert raw.config_get('appendonly') == {'appendonly': 'no'}
    persistence = driver._health()['persistence']
    assert persistence['aof_enabled'] is False
    assert 'AOF' in persistence['warning']
    raw.config_set('appendonly', 'yes')
    try:
        assert driver._health()['persistence'] == {'aof_enabled': True}
    finally:
        raw.config_set('appendonly', 'no')


def test_a_pop_waits_out_a_loading_redis_and_returns_its_batch(
        driver, conf, project, monkeypatch):
    # The pop runs but its reply is lost; Redis then restarts and answers
    # LOADING for longer than every reconnect attempt would last. Giving up
    # would answer 503 for a batch already taken; the wait returns it.
    monkeypatch.setattr(driver.store_conf, 'reconnect_sleep', 0.0)
    monkeypatch.setattr(driver.store_conf, 'max_reconnect_attempts', 1)
    monkeypatch.setattr(driver.store_conf, 'loading_wait', 5.0)
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a', 'b', 'c')
    original = driver.guarded
    faults = [redis_py.exceptions.ConnectionError('reply lost')] + [
        redis_py.exceptions.BusyLoadingError('LOADING')] * 4

    def guarded(call, kept_until=None):
        def faulty():
            if faults and isinstance(faults[0],
                                     redis_py.exceptions.BusyLoadingError):
                raise faults.pop(0)
            result = call()
            if faults:
                raise faults.pop(0)
            return result
        return original(faulty, kept_until)

    monkeypatch.setattr(driver, 'guarded', guarded)
    popped = driver.message_controller.pop('q', 2, project=project)
    assert [m['body'] for m in popped] == ['a', 'b']
    assert faults == []
    monkeypatch.setattr(driver, 'guarded', original)
    assert [m['body'] for m in listed(driver, 'q', project)] == ['c']


def test_a_redis_loading_for_too_long_is_a_storage_error(driver, conf,
                                                         project,
                                                         monkeypatch):
    monkeypatch.setattr(driver.store_conf, 'loading_wait', 0.3)
    driver.queue_controller.create('q', project=project)
    original = driver.guarded

    def guarded(call, kept_until=None):
        def loading():
            raise redis_py.exceptions.BusyLoadingError('LOADING')
        return original(loading, kept_until)

    monkeypatch.setattr(driver, 'guarded', guarded)
    with pytest.raises(errors.BackendUnavailable, match='LOADING'):
        driver.message_controller.pop('q', 2, project=project)


def test_the_default_retry_span_stays_below_the_shortest_ttl(driver):
    # README: (3 + 1) x 5 s + 0.2 x (1 + 2 + 4) s + 15 s + 10 s.
    assert driver.retry_span_ms == 46400
    assert driver.retry_span_ms < redis_driver.SHORTEST_TTL_MS


def test_a_call_in_doubt_retries_until_its_kept_result_would_be_gone(
        driver, monkeypatch):
    # docs/options.md, docs/reliability.md: a claim or pop whose outcome
    # is in doubt retries, with the same backoff, until its kept result
    # would be gone, 31.4 s with the defaults (the retry span less its
    # 10 s margin and one socket_timeout), then answers 503. Each attempt
    # here times out after socket_timeout on a clock of the test's own.
    now = 0.0
    kept_for = driver.result_kept_until() - time.monotonic()
    assert kept_for == pytest.approx(31.4, abs=0.05)
    starts = []

    def sleep(seconds):
        nonlocal now
        now += seconds

    def timed_out():
        starts.append(now)
        sleep(driver.store_conf.socket_timeout)
        raise redis_py.exceptions.TimeoutError('Timeout reading from socket')

    monkeypatch.setattr(connection, 'time', types.SimpleNamespace(
        monotonic=lambda: now, sleep=sleep))
    with pytest.raises(errors.BackendUnavailable):
        driver.guarded(timed_out, kept_until=31.4)
    # Past its 3 reconnect attempts; the last starts before 31.4 s (its
    # request then has the margin every retry has), none after.
    assert [round(start, 1) for start in starts] == [
        0.0, 5.2, 10.6, 16.4, 23.0, 31.2]


def test_a_retry_span_reaching_the_shortest_ttl_is_warned(
        request, conf, caplog):
    conf.set_override('loading_wait', 30.0,
                      group='drivers:message_store:delay.redis')
    with caplog.at_level(logging.WARNING):
        slow = factories_redis.make_driver(request, conf)
    slow.close()
    assert slow.retry_span_ms == 61400
    assert any('reaches Zaqar\'s shortest message ttl (60 s)'
               in record.getMessage() for record in caplog.records)


def test_a_retried_post_costs_a_persistent_consumer_nothing(
        driver, project, lose_next_reply):
    # The retry finds the ids stored and skips them; it takes no position
    # for them, so the consumer that reads all six has lost nothing.
    driver.queue_controller.create('q', project=project)
    consume_id = uuid.uuid4()
    driver.subscription_controller.create(
        'q', consumers.PREFIX + str(consume_id), 3600, {}, project=project)
    post(driver, 'q', project, 'a', 'b')
    lose_next_reply()
    post(driver, 'q', project, 'c', 'd')
    post(driver, 'q', project, 'e', 'f')
    read, marker = [], None
    while True:
        pages = driver.message_controller.list(
            'q', project=project, marker=marker, client_uuid=consume_id,
            limit=2)
        got = [m['body'] for m in next(pages)]
        marker = next(pages)
        if not got:
            break
        read += got
    assert read == ['a', 'b', 'c', 'd', 'e', 'f']
    state = driver.message_controller._consumer('q', project,
                                                str(consume_id))[1]
    assert state.lost == 0


def test_a_repeated_dead_letter_copy_costs_a_persistent_consumer_nothing(
        driver, project, clock, monkeypatch):
    # docs/usage.md: a repeated outbox copy skips the ids it already has
    # and takes no position for them. Tried: the node that copied
    # 'poison' into the dead-letter queue dies before the outbox forgets
    # it, so gc copies it again with the same id. Had the skipped copy
    # taken a position, the page after 'poison' would begin one past the
    # next free position and count it as lost.
    poison_due(driver, project, clock)
    consume_id = uuid.uuid4()
    driver.subscription_controller.create(
        'dlq', consumers.PREFIX + str(consume_id), 3600, {},
        project=project)
    post(driver, 'dlq', project, 'before', ttl=3600)
    claim_dying_before_outbox_done(driver, project, monkeypatch)
    read, marker = read_as(driver, 'dlq', project, consume_id)
    assert read == ['before', 'poison']
    messages = driver.message_controller
    store, copied = messages._insert, []

    def recorded(queue, project, moved, *args):
        copied.extend((queue, m.id) for m in moved)
        return store(queue, project, moved, *args)

    monkeypatch.setattr(messages, '_insert', recorded)
    clock.advance(redis_driver.GC_OUTBOX_AGE_MS / 1000 + 1)
    driver.gc()
    monkeypatch.setattr(messages, '_insert', store)
    # gc did copy 'poison' again, under the id the queue already holds.
    [(target, again)] = copied
    assert target == 'dlq'
    assert [m['id'] for m in listed(driver, 'dlq', project)][1] == again
    post(driver, 'dlq', project, 'after', ttl=3600)
    assert read_as(driver, 'dlq', project, consume_id, marker)[0] == [
        'after']
    assert [m['body'] for m in listed(driver, 'dlq', project)] == [
        'before', 'poison', 'after']
    state = driver.message_controller._consumer('dlq', project,
                                                str(consume_id))[1]
    assert state.lost == 0


def read_as(driver, queue, project, consume_id, marker=None):
    """Bodies a persistent consumer reads from ``marker`` to the end, in
    pages of one (each acknowledging the last), and the last marker."""
    read = []
    while True:
        pages = driver.message_controller.list(
            queue, project=project, marker=marker, client_uuid=consume_id,
            limit=1)
        got = [m['body'] for m in next(pages)]
        if not got:
            return read, marker
        marker = next(pages)
        read += got


def grouped_queue(driver, project, name='q'):
    driver.queue_controller.create(
        name, metadata={'_message_group_key': 'g'}, project=project)


def test_a_group_move_retried_after_a_lost_reply_moves_it(
        driver, project, lose_next_reply):
    # The first attempt started the move and took its batch: the retry
    # answered "being moved" (GroupMoving) to the caller's own move, and
    # the batch waited in the outbox for gc.
    grouped_queue(driver, project)
    driver.queue_controller.create('t', project=project)
    post(driver, 'q', project, *[{'g': 'big', 'n': n} for n in range(10)])
    lose_next_reply()
    moved = driver.message_controller.move_group('q', 'big', 't',
                                                 project=project)
    assert moved == 10
    assert [m['body']['n'] for m in listed(driver, 't', project)] == list(
        range(10))


def test_a_group_move_step_retried_after_a_lost_reply_keeps_order(
        driver, project, monkeypatch):
    # The retried step took the next batch, which went to the target
    # ahead of the one whose reply was lost (gc copied that one later).
    grouped_queue(driver, project)
    driver.queue_controller.create('t', project=project)
    post(driver, 'q', project, *[{'g': 'big', 'n': n} for n in range(100)])
    monkeypatch.setattr(driver.store_conf, 'reconnect_sleep', 0.0)
    original = driver.scripts.run
    steps = []

    def lossy(name, *args, **kwargs):
        result = original(name, *args, **kwargs)
        if name == 'group_move':
            steps.append(args)
            if len(steps) == 2:     # the first 'continue'
                raise redis_py.exceptions.ConnectionError('reply lost')
        return result

    monkeypatch.setattr(driver.scripts, 'run', lossy)
    assert driver.message_controller.move_group('q', 'big', 't',
                                                project=project) == 100
    assert [m['body']['n'] for m in listed(driver, 't', project)] == list(
        range(100))


def test_gc_does_not_copy_again_a_moved_group_its_consumer_deleted(
        driver, project, clock, monkeypatch):
    # docs/reliability.md: the mover dies after its batch reached the
    # target and before its outbox was cleared; the target's consumer
    # deletes the batch; gc finishing the move (after 60 s) copies it
    # again, and the target's memory of deleted ids skips every one.
    grouped_queue(driver, project)
    # Ungrouped, so that one pop takes the whole batch.
    driver.queue_controller.create('t', project=project)
    post(driver, 'q', project, *[{'g': 'big', 'n': n} for n in range(10)])
    dying_before_outbox_done(
        driver, monkeypatch, lambda: driver.message_controller.move_group(
            'q', 'big', 't', project=project))
    popped = driver.message_controller.pop('t', 10, project=project)
    assert [m['body']['n'] for m in popped] == list(range(10))
    clock.advance(61)
    driver.gc()
    assert listed(driver, 't', project, include_claimed=True) == []
    assert listed(driver, 'q', project, include_claimed=True) == []


class LoseFirstHsetnxReply:
    """A redis client whose first HSETNX runs, then loses its reply."""

    def __init__(self, real):
        self._real, self._armed = real, True

    def __getattr__(self, name):
        return getattr(self._real, name)

    def hsetnx(self, *args):
        result = self._real.hsetnx(*args)
        if self._armed:
            self._armed = False
            raise redis_py.exceptions.ConnectionError('reply lost')
        return result


@pytest.fixture
def lossy_subscriptions(driver, monkeypatch):
    monkeypatch.setattr(driver.store_conf, 'reconnect_sleep', 0.0)
    subscriptions = driver.subscription_controller
    monkeypatch.setattr(subscriptions, '_client',
                        LoseFirstHsetnxReply(subscriptions._client))
    return subscriptions


def test_a_subscription_create_retried_after_a_lost_reply_creates_it(
        driver, project, lossy_subscriptions):
    # Its retry found the subscriber taken by its own first attempt and
    # returned None, which Zaqar answers 409, with nothing stored.
    driver.queue_controller.create('q', project=project)
    created = lossy_subscriptions.create('q', 'http://example.com/hook',
                                         3600, {}, project=project)
    assert created is not None
    found = lossy_subscriptions.get_with_subscriber(
        'q', 'http://example.com/hook', project=project)
    assert found['id'] == created


def test_a_subscriber_change_retried_after_a_lost_reply_is_made(
        driver, project, lossy_subscriptions):
    driver.queue_controller.create('q', project=project)
    lossy_subscriptions._client._armed = False
    created = lossy_subscriptions.create('q', 'http://example.com/a', 3600,
                                         {}, project=project)
    lossy_subscriptions._client._armed = True
    lossy_subscriptions.update('q', created, project=project,
                               subscriber='http://example.com/b')
    assert lossy_subscriptions.get('q', created, project=project)[
        'subscriber'] == 'http://example.com/b'
    # And a real rival still refuses the change.
    other = lossy_subscriptions.create('q', 'http://example.com/c', 3600,
                                       {}, project=project)
    with pytest.raises(storage_errors.SubscriptionAlreadyExists):
        lossy_subscriptions.update('q', other, project=project,
                                   subscriber='http://example.com/b')


def test_a_post_retried_after_its_message_left_for_another_queue(
        driver, project, lose_next_reply):
    # The first attempt stored the message; before the retry, two claims
    # sent it to the dead-letter queue. The retry found it neither stored
    # nor deleted here and stored it again: in both queues. A message
    # coming back by an outbox copy (a dead letter moved back) is still
    # taken (test_a_dead_letter_moved_back_is_taken_again).
    driver.queue_controller.create('dlq', project=project)
    driver.queue_controller.create('q', project=project, metadata={
        '_max_claim_count': 1, '_dead_letter_queue': 'dlq'})

    def dead_letter_it():
        claim_id, got = claim(driver, 'q', project)
        assert [m['body'] for m in got] == ['once']
        driver.claim_controller.delete('q', claim_id, project=project)
        assert claim(driver, 'q', project) == (None, [])

    lose_next_reply(dead_letter_it)
    post(driver, 'q', project, 'once')
    assert listed(driver, 'q', project, include_claimed=True) == []
    assert [m['body'] for m in listed(driver, 'dlq', project)] == ['once']


def test_a_dead_letter_moved_back_is_taken_again(driver, project):
    driver.queue_controller.create('q', project=project, metadata={
        '_message_group_key': 'g'})
    driver.queue_controller.create('t', project=project, metadata={
        '_message_group_key': 'g'})
    post(driver, 'q', project, {'g': 'a'})
    assert driver.message_controller.move_group('q', 'a', 't',
                                                project=project) == 1
    assert driver.message_controller.move_group('t', 'a', 'q',
                                                project=project) == 1
    assert [m['body'] for m in listed(driver, 'q', project)] == [{'g': 'a'}]


def post_many(driver, queue, project, count, **extra):
    ids = []
    for start in range(0, count, 100):
        ids += post(driver, queue, project,
                    *range(start, min(count, start + 100)), **extra)
    return ids


def qkey(queue, project, suffix):
    return keys.queue_prefix(queue, project) + ':' + suffix
