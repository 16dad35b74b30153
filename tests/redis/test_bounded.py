"""Redis: every script does bounded work per call, whatever the queue holds.

Work is counted, never timed: ``INFO commandstats`` counts the commands a
script runs inside Redis, so a test can say "this call dropped at most N
messages" on a noisy machine. Each test builds a backlog far above the
per-call batch (lua/_common.lua BATCH) and checks both the bound and that
the contract still holds (nothing early, nothing expired, backlog drains).
"""

import json

import pytest
import redis as redis_py

from tests.contract.helpers import (CLIENT, OTHER_CLIENT, bodies, claim,
                                    listed, post, stats)
from zaqar_delay import errors
from zaqar_delay.drivers.redis import keys

BATCH = 100
MOVE_BATCH = 25
BACKLOG = 1000


@pytest.fixture
def raw(redis_url):
    return redis_py.Redis.from_url(redis_url)


def post_many(driver, queue, project, count, client=CLIENT, **extra):
    ids = []
    for start in range(0, count, 100):
        ids += post(driver, queue, project,
                    *range(start, min(count, start + 100)), client=client,
                    **extra)
    return ids


def calls(raw, *commands):
    stats = raw.info('commandstats')
    return sum(stats.get('cmdstat_' + c, {}).get('calls', 0)
               for c in commands)


def counted(raw, run, *commands):
    """(result of run(), commands of that kind it ran inside Redis)."""
    raw.config_resetstat()
    result = run()
    return result, calls(raw, *commands)


def dropped(raw, project, run, queue='q'):
    """(result of run(), messages it took out of the queue): counted in
    its index of every message, as expired ones are dropped together
    (one DEL for many: drop_all in lua/_common.lua)."""
    msgs = keys.queue_prefix(queue, project) + ':msgs'
    before = raw.zcard(msgs)
    result = run()
    return result, before - raw.zcard(msgs)


def test_a_due_backlog_is_promoted_in_batches_and_drains(driver, raw,
                                                         project, clock):
    driver.queue_controller.create(
        'q', metadata={'_default_message_delay': 60}, project=project)
    post_many(driver, 'q', project, BACKLOG, ttl=900)
    late = post(driver, 'q', project, 'late', ttl=900, delay=600)[0]
    clock.advance(61)
    (_, got), promoted = counted(
        raw, lambda: claim(driver, 'q', project, limit=1), 'zadd')
    # Due messages are claimable at once, without a polling step...
    assert bodies(got) == [0]
    # ...but one claim promotes a bounded batch, not the whole backlog.
    assert promoted <= 50, 'one claim promoted %d messages' % promoted
    handed = [0]
    for _ in range(BACKLOG):
        _, got = claim(driver, 'q', project, limit=10)
        if not got:
            break
        assert late not in [m['id'] for m in got]
        handed += bodies(got)
    assert sorted(handed) == list(range(BACKLOG))


def test_stats_is_exact_without_purging_every_expired_message(
        driver, raw, project, clock):
    driver.queue_controller.create('q', project=project)
    post_many(driver, 'q', project, BACKLOG, ttl=60)
    kept = post(driver, 'q', project, 'kept', ttl=600)[0]
    clock.advance(61)
    result, gone = dropped(raw, project, lambda: stats(driver, 'q', project))
    assert gone <= BATCH, 'stats dropped %d messages' % gone
    assert (result['total'], result['free'], result['claimed'],
            result['delayed']) == (1, 1, 0, 0)
    # Past a crowd of expired messages, oldest comes from an index.
    assert result['oldest']['id'] == result['newest']['id'] == kept
    assert [m['body'] for m in listed(driver, 'q', project)] == ['kept']


def test_stats_counts_groups_in_flight_without_walking_claims(
        driver, raw, project, clock):
    driver.queue_controller.create(
        'q', metadata={'_message_group_key': 'g'}, project=project)
    post_many(driver, 'q', project, 300)          # ungrouped, then claimed
    post(driver, 'q', project, *[{'g': n} for n in range(5)])
    post(driver, 'q', project, *[{'g': n} for n in range(5)])
    claimed_ids = []
    for _ in range(40):
        cid, got = claim(driver, 'q', project, limit=10, ttl=60)
        if got:
            claimed_ids.append(cid)
    result, walked = counted(raw, lambda: stats(driver, 'q', project),
                             'hexists', 'hget', 'hmget')
    assert result['groups'] == 5 and result['groups_in_flight'] == 5
    assert walked <= 2 * 50, 'stats read %d message hashes' % walked
    # Renewed, released and lapsed claims all leave the count right.
    last = claimed_ids[-1]
    driver.claim_controller.update('q', last, {'ttl': 600, 'grace': 0},
                                   project=project)
    clock.advance(61)
    in_flight = stats(driver, 'q', project)['groups_in_flight']
    renewed = [m for m in driver.claim_controller.get(
        'q', last, project=project)[1] if isinstance(m['body'], dict)]
    assert in_flight == len(renewed)
    driver.claim_controller.delete('q', last, project=project)
    assert stats(driver, 'q', project)['groups_in_flight'] == 0


def test_each_list_script_reads_a_bounded_number_of_messages(driver,
                                                             project):
    driver.queue_controller.create('q', project=project)
    post_many(driver, 'q', project, BACKLOG, client=CLIENT)
    others = post(driver, 'q', project, 'a', 'b', client=OTHER_CLIENT)
    now, last, flat, resume = driver.run_script(
        'list', 'q', project, '', 10, 0, 0, 0, str(CLIENT))
    assert flat == [] and last == b'' and int(resume) == BATCH
    # The controller assembles the full page from bounded calls.
    pages = driver.message_controller.list('q', project=project,
                                           client_uuid=CLIENT, limit=10)
    assert [m['id'] for m in next(pages)] == others


def test_first_reads_a_bounded_number_of_delayed_messages(driver, raw,
                                                          project):
    driver.queue_controller.create(
        'q', metadata={'_default_message_delay': 600}, project=project)
    post_many(driver, 'q', project, BACKLOG)
    due = post(driver, 'q', project, 'due', delay=0)[0]
    found, reads = counted(
        raw, lambda: driver.message_controller.first('q', project=project),
        'hmget')
    assert found['id'] == due
    assert reads <= BATCH + 5, 'first read %d messages' % reads


def test_a_claim_looks_at_a_bounded_number_of_expired_messages(
        driver, raw, project, clock):
    driver.queue_controller.create('q', project=project)
    post_many(driver, 'q', project, BACKLOG, ttl=60)
    live = post(driver, 'q', project, 'live', ttl=600)[0]
    clock.advance(61)
    raw.config_resetstat()
    (_, got), gone = dropped(
        raw, project, lambda: claim(driver, 'q', project, limit=10))
    # Twice its limit, then (having found nothing) a batch more.
    assert gone == 2 * 10 + BATCH, 'one claim dropped %d' % gone
    # Dropped together (drop_all), each of the two looks sends one ZREM
    # per index (7) and one DEL, not 7 and 1 per message (840 and 120).
    assert (calls(raw, 'zrem'), calls(raw, 'del')) == (2 * 7, 2)
    claims = 1
    while not got and claims < BACKLOG:
        _, got = claim(driver, 'q', project, limit=10)
        claims += 1
    assert [m['id'] for m in got] == [live]
    # 1,000 expired ahead: 9 claims, not the 50 of twice the limit alone.
    assert claims == -(-(BACKLOG + 1) // (2 * 10 + BATCH)), claims


def traces(raw, project, ids, queue='q'):
    """Where any of ``ids`` is still found: its hash, or an index of the
    queue (a member of delayed names its id after its position)."""
    found = [mid for mid in ids if raw.exists(
        keys.message_key(queue, project, mid))]
    for key in keys.queue_keys(queue, project):
        if raw.type(key) == b'zset':
            members = {m.decode().split(':')[-1]
                       for m in raw.zrange(key, 0, -1)}
            found += [(key, mid) for mid in ids if mid in members]
    return found


def test_expired_messages_dropped_together_leave_no_trace(
        driver, raw, project, clock):
    # A claim and a gc step drop the expired messages in no group
    # together (drop_all): each leaves its hash and every index, as one
    # dropped alone does (gc those expired while delayed too, which no
    # claim meets); a grouped one still unblocks its group's next member
    # at once.
    driver.queue_controller.create('q', project=project, metadata={
        '_message_group_key': 'g', '_default_message_delay': 1})
    met = post(driver, 'q', project, *range(30), ttl=60, delay=0)
    [head] = post(driver, 'q', project, {'g': 'x', 'n': 1}, ttl=60,
                  delay=0)
    post(driver, 'q', project, {'g': 'x', 'n': 2}, ttl=600, delay=0)
    clock.advance(61)
    assert bodies(claim(driver, 'q', project, limit=1)[1]) == [
        {'g': 'x', 'n': 2}]
    assert traces(raw, project, met + [head]) == []
    for_gc = post(driver, 'q', project, *range(30), ttl=60, delay=0)
    for_gc += post(driver, 'q', project, *range(5), ttl=60, delay=120)
    # One filed in delayed by its bare id, as earlier versions did, and
    # not due before it expires.
    raw.zadd(keys.queue_prefix('q', project) + ':delayed',
             {for_gc[0]: 2 ** 50})
    clock.advance(61)
    driver.gc()
    assert traces(raw, project, for_gc) == []
    # Only the member claimed is left.
    assert stats(driver, 'q', project)['total'] == 1


def test_a_claim_behind_fewer_than_a_batch_of_expired_messages_answers(
        driver, project, clock):
    # 50 expired messages ahead of a live one: more than twice the limit,
    # fewer than the batch a claim that ran out short looks at next.
    driver.queue_controller.create('q', project=project)
    post_many(driver, 'q', project, 50, ttl=60)
    live = post(driver, 'q', project, 'live', ttl=600)[0]
    clock.advance(61)
    assert [m['id'] for m in claim(driver, 'q', project, limit=10)[1]] \
        == [live]


def test_gc_settles_a_backlog_in_short_steps(driver, project, clock,
                                            monkeypatch):
    driver.queue_controller.create('q', project=project)
    post_many(driver, 'q', project, BACKLOG, ttl=60)
    clock.advance(61)
    steps = []
    run = driver.run_script

    def recording(name, queue, of, *args, **kwargs):
        result = run(name, queue, of, *args, **kwargs)
        if name == 'gc' and (queue, of) == ('q', project):
            steps.append(result[0])
        return result

    monkeypatch.setattr(driver, 'run_script', recording)
    monkeypatch.setattr(driver.message_controller, '_run', recording)
    driver.gc()
    assert sum(steps) == BACKLOG and max(steps) <= BATCH
    assert stats(driver, 'q', project)['total'] == 0


def grouped_queue(driver, project, name='q'):
    driver.queue_controller.create(
        name, metadata={'_message_group_key': 'g'}, project=project)


def post_group(driver, queue, project, count):
    for start in range(0, count, 100):
        post(driver, queue, project,
             *[{'g': 'big', 'n': n}
               for n in range(start, min(count, start + 100))])


def test_a_group_moves_in_bounded_batches_and_in_order(driver, project):
    grouped_queue(driver, project)
    driver.queue_controller.create('t', project=project)
    post_group(driver, 'q', project, BACKLOG)
    group = json.dumps('big')
    code, ids, done = driver.run_script('group_move', 'q', project, group,
                                        't', 'start')
    assert (code, len(ids), done) == (0, MOVE_BATCH, 0)
    # Frozen while it moves: nothing of the group is handed out.
    assert claim(driver, 'q', project)[1] == []
    with pytest.raises(errors.GroupMoving):
        driver.message_controller.move_group('q', 'big', 't',
                                             project=project)
    # The move's own caller continues it.
    moved = driver.message_controller._finish_move(
        'q', project, group, [0, ids, 0])
    assert moved == BACKLOG
    assert [m['body']['n'] for m in listed(driver, 't', project)] == list(
        range(BACKLOG))
    assert stats(driver, 'q', project)['total'] == 0


def test_gc_finishes_a_group_move_its_caller_abandoned(driver, project,
                                                       clock):
    grouped_queue(driver, project)
    driver.queue_controller.create('t', project=project)
    post_group(driver, 'q', project, 500)
    group = json.dumps('big')
    driver.run_script('group_move', 'q', project, group, 't', 'start')
    driver.gc()
    assert listed(driver, 't', project) == []       # not abandoned yet
    clock.advance(61)
    driver.gc()
    assert [m['body']['n'] for m in listed(driver, 't', project)] == list(
        range(500))
    assert listed(driver, 'q', project, include_claimed=True) == []
    # The group is no longer frozen: new members are claimable.
    post(driver, 'q', project, {'g': 'big', 'n': 'new'})
    assert [m['body']['n'] for m in claim(driver, 'q', project)[1]] == [
        'new']


def test_a_stalled_mover_and_the_host_that_took_over_keep_group_order(
        driver, project):
    """A mover took a batch and stalled before copying it; another host
    (gc taking the move over, or a second gc host) continued the move.
    Its step took the next batch, so the group reached the target with
    the stalled batch last. A step now hands out the uncopied batch
    again first."""
    from zaqar_delay.drivers.redis import outbox
    grouped_queue(driver, project)
    driver.queue_controller.create('t', project=project)
    post_group(driver, 'q', project, 100)
    group = json.dumps('big')
    _, stalled, _ = driver.run_script('group_move', 'q', project, group,
                                      't', 'start')
    taken_over = driver.run_script('group_move', 'q', project, group, '',
                                   'continue')
    assert taken_over[1] == stalled
    driver.message_controller._finish_move('q', project, group, taken_over)
    # The stalled mover wakes up: its copy skips what is there already.
    outbox.transfer(driver, 'q', project,
                    [m.decode() for m in stalled])
    assert [m['body']['n'] for m in listed(driver, 't', project)] == list(
        range(100))


def test_gc_copies_an_abandoned_moves_batch_before_taking_the_next(
        driver, project, clock):
    """gc looks for abandoned copies among the first outbox entries by
    position (a batch of them): younger entries of other moves ahead
    hid the abandoned move's batch, and gc took the move's next batches
    to the target before it."""
    grouped_queue(driver, project)
    for name in ('t', 'u'):
        driver.queue_controller.create(name, project=project)
    for key in 'abc':
        post(driver, 'q', project, *[{'g': key, 'n': n} for n in range(30)])
    post_group(driver, 'q', project, 100)
    driver.run_script('group_move', 'q', project, json.dumps('big'), 't',
                      'start')
    clock.advance(61)
    for key in 'abc':       # 75 young outbox entries, ahead by position
        driver.run_script('group_move', 'q', project, json.dumps(key), 'u',
                          'start')
    driver.gc()
    assert [m['body']['n'] for m in listed(driver, 't', project)] == list(
        range(100))


def test_a_group_with_a_claimed_head_is_not_moved(driver, project):
    grouped_queue(driver, project)
    driver.queue_controller.create('t', project=project)
    post_group(driver, 'q', project, 300)
    claim(driver, 'q', project, limit=1)
    with pytest.raises(errors.GroupInFlight):
        driver.message_controller.move_group('q', 'big', 't',
                                             project=project)
    assert stats(driver, 'q', project)['total'] == 300


def test_a_group_is_purged_in_bounded_batches_from_its_tail(driver,
                                                            project):
    grouped_queue(driver, project)
    post_group(driver, 'q', project, BACKLOG)
    post(driver, 'q', project, {'g': 'other'})
    group = json.dumps('big')
    deleted, left = driver.run_script('group_purge', 'q', project, group)
    assert (deleted, left) == (BATCH, BACKLOG - BATCH)
    # The head stays, so the rest of the group stays behind it in order.
    _, got = claim(driver, 'q', project)
    assert sorted(str(m['body']) for m in got) == sorted(
        [str({'g': 'big', 'n': 0}), str({'g': 'other'})])
    assert driver.message_controller.purge_group(
        'q', 'big', project=project) == BACKLOG - BATCH
    assert [m['body'] for m in listed(driver, 'q', project,
                                      include_claimed=True)] == [
        {'g': 'other'}]


def test_a_gc_visit_takes_a_bounded_part_of_an_abandoned_move(
        driver, project, clock, monkeypatch):
    """gc finished an abandoned group move of any size within one visit
    of its queue (500 members: 20 move steps), while every other queue
    waited. A visit now takes at most VISIT_STEPS steps of it; the queue's
    next visits in the same pass go on, and the move still completes."""
    from zaqar_delay import driver as base_driver
    grouped_queue(driver, project)
    driver.queue_controller.create('t', project=project)
    post_group(driver, 'q', project, 500)
    driver.run_script('group_move', 'q', project, json.dumps('big'), 't',
                      'start')
    clock.advance(61)
    controller = driver.message_controller
    visits, gc, run = [], controller.gc, controller._run

    def visit(queue, *args):
        if queue == 'q':
            visits.append(0)
        return gc(queue, *args)

    def counted(script, queue, *args, **kwargs):
        if script == 'group_move' and queue == 'q':
            visits[-1] += 1
        return run(script, queue, *args, **kwargs)

    monkeypatch.setattr(controller, 'gc', visit)
    monkeypatch.setattr(controller, '_run', counted)
    driver.gc()
    assert len(visits) > 1 and max(visits) <= base_driver.VISIT_STEPS, (
        visits)
    assert [m['body']['n'] for m in listed(driver, 't', project)] == list(
        range(500))


def test_gc_finds_an_abandoned_dead_letter_behind_a_batch_of_young_ones(
        driver, project, raw, clock, monkeypatch):
    """gc looked at the first GC_BATCH outbox entries by position only: a
    dead letter whose copy died (its API node stopped) waited behind as
    many younger ones, for as long as moves kept coming ahead of it. It
    now looks a batch further each call, from the start again once it
    reached the end."""
    from zaqar_delay.drivers.redis import driver as redis_driver
    from zaqar_delay.drivers.redis import keys
    from zaqar_delay.drivers.redis import outbox
    driver.queue_controller.create('dlq', project=project)
    driver.queue_controller.create('q', project=project, metadata={
        '_max_claim_count': 1, '_dead_letter_queue': 'dlq'})
    young = redis_driver.GC_BATCH + 10
    post(driver, 'q', project, *range(young), ttl=3600)
    post(driver, 'q', project, 'old', ttl=3600)
    assert len(claim(driver, 'q', project, limit=young, ttl=600)[1]) == young
    assert bodies(claim(driver, 'q', project, limit=1, ttl=60)[1]) == ['old']
    transfer = outbox.transfer
    # Every copy dies before it starts: the entries stay in the outbox.
    monkeypatch.setattr(outbox, 'transfer', lambda *args, **kwargs: None)
    clock.advance(61)
    assert claim(driver, 'q', project)[1] == []     # 'old' dead-lettered
    clock.advance(600)
    assert claim(driver, 'q', project, limit=young)[1] == []
    monkeypatch.setattr(outbox, 'transfer', transfer)
    box = keys.queue_prefix('q', project) + ':outbox'
    assert raw.zcard(box) == young + 1
    for _ in range(2):      # ceil((young + 1) / GC_BATCH) passes
        driver.gc()
    assert bodies(listed(driver, 'dlq', project)) == ['old']
    assert raw.zcard(box) == young          # younger than the gc age
