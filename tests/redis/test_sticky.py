"""Sticky groups on Redis (lua/_common.lua, sweep_idle and pinned_to):
what the contract tests cannot see. An idle client's groups are freed a
batch (BATCH, 100) per claim or stats call, those whose heads wait for it
first; and a claim that meets a head pinned to an idle client drops that
pin at once, whatever group the sweep frees.

The state is read from the keys (keys.py: Q:pin, Q:pseen, Q:pa:<client>),
never through list_groups, whose script drops the idle pins it meets.
The shipped BATCH is used, not a smaller one: on Redis pinning a few
hundred groups takes well under a second.
"""

import pytest
import redis as redis_py

from tests.contract.helpers import post, stats, zaqar_purge
from tests.contract.test_sticky import ALICE, BOB, STICKY, STICKY_S
from tests.contract.test_sticky import claim_as, delete_as, msg, names
from zaqar_delay import sticky
from zaqar_delay.drivers.redis import keys

BATCH = 100  # lua/_common.lua
CAROL = 'carol-client'


@pytest.fixture
def raw(redis_url):
    client = redis_py.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


def pins_of(raw, queue, project, client):
    """How many groups Q:pin pins to ``client``."""
    found = raw.hvals(keys.queue_prefix(queue, project) + ':pin')
    return found.count(client)


def waiting_for(raw, queue, project, client):
    """Heads filed under ``client``'s own index (Q:pa:<client>)."""
    return raw.zcard(keys.queue_prefix(queue, project) + ':pa:' + client)


def tracked(raw, queue, project, client):
    """Whether ``client`` is still known as a sticky client (Q:pseen)."""
    return raw.zscore(keys.queue_prefix(queue, project) + ':pseen',
                      client) is not None


def hold_emptied(driver, queue, project, client, count):
    """``count`` one-message groups taken and deleted by ``client``: their
    pins outlive them (no head waits for it)."""
    with sticky.acting_as(client):
        for start in range(0, count, BATCH):
            post(driver, queue, project, *[
                msg('e%03d' % n, 1)
                for n in range(start, min(start + BATCH, count))])
            claim_id, got = driver.claim_controller.create(
                queue, {'ttl': 600, 'grace': 30}, project=project,
                limit=BATCH)
            got = list(got)
            driver.message_controller.bulk_delete(
                queue, [m['id'] for m in got], project=project,
                claim_ids=[claim_id])


def hold_waiting(driver, queue, project, client, count, name='w'):
    """``count`` groups whose first message ``client`` took and deleted:
    each one's second message waits in its own index."""
    post(driver, queue, project,
         *[msg('%s%02d' % (name, n), k) for k in (1, 2)
           for n in range(count)])
    taken = 0
    while taken < count:
        claim_id, got = claim_as(client, driver, queue, project, limit=10)
        delete_as(client, driver, queue, project, got, claim_id)
        taken += len(got)


def test_one_claim_frees_one_batch_waiting_heads_first(
        driver, raw, make_queue, project, clock):
    """Idle Alice holds 230 groups that emptied and 30 whose heads wait
    for her. Each claim by Bob frees 100 of them, not all 260: the first
    frees the 30 waiting ones (he takes them at once) and 70 stale pins
    (chosen at random, which would hold all 30 waiting ones with a
    chance below 1e-15), the second 100 more, the third the last 60,
    and Alice, left with none, is forgotten."""
    queue = make_queue(STICKY)
    emptied, waiting = 2 * BATCH + 30, 30
    hold_emptied(driver, queue, project, ALICE, emptied)
    hold_waiting(driver, queue, project, ALICE, waiting)
    held = emptied + waiting
    assert pins_of(raw, queue, project, ALICE) == held
    assert waiting_for(raw, queue, project, ALICE) == waiting
    clock.advance(STICKY_S)
    expected = ['w%02d2' % n for n in range(waiting)]
    left = []
    for turn in range(3):
        got = claim_as(BOB, driver, queue, project, limit=10)[1]
        assert names(got) == expected[10 * turn:10 * turn + 10]
        assert waiting_for(raw, queue, project, ALICE) == 0
        left.append(pins_of(raw, queue, project, ALICE))
    assert left == [held - BATCH, held - 2 * BATCH, 0]
    assert not tracked(raw, queue, project, ALICE)
    assert pins_of(raw, queue, project, BOB) == waiting


def test_a_claim_drops_an_idle_clients_pin_it_meets_outside_the_batch(
        driver, raw, make_queue, project, clock):
    """pinned_to() drops the pin of a client gone idle when it files that
    group's head. Carol went idle first, so Bob's claim sweeps her, not
    Alice; yet the head of Alice's 'x', whose claim lapsed, is filed (as
    the claim settles it) under avail, not under Alice's index, and Bob
    takes it in that claim. Alice's 'y', not met, stays hers."""
    queue = make_queue(STICKY)
    post(driver, queue, project, msg('c', 1), msg('x', 1), msg('y', 1),
         msg('y', 2))
    assert names(claim_as(CAROL, driver, queue, project, limit=1)[1]) == [
        'c1']
    clock.advance(1)
    assert names(claim_as(ALICE, driver, queue, project, limit=1,
                          ttl=30)[1]) == ['x1']
    claim_id, got = claim_as(ALICE, driver, queue, project, limit=1)
    assert names(got) == ['y1']
    delete_as(ALICE, driver, queue, project, got, claim_id)
    clock.advance(STICKY_S)
    # Both idle; x1's claim ended, not yet settled.
    assert pins_of(raw, queue, project, ALICE) == 2
    assert names(claim_as(BOB, driver, queue, project, limit=1)[1]) == [
        'x1']
    # The sweep freed Carol's group and forgot her; of Alice's, only the
    # pin that claim met went.
    assert pins_of(raw, queue, project, CAROL) == 0
    assert not tracked(raw, queue, project, CAROL)
    assert pins_of(raw, queue, project, ALICE) == 1
    assert waiting_for(raw, queue, project, ALICE) == 1
    assert pins_of(raw, queue, project, BOB) == 1
    # Bob's next claim sweeps Alice.
    assert names(claim_as(BOB, driver, queue, project)[1]) == ['y2']


def test_stats_free_an_idle_clients_groups(driver, raw, make_queue,
                                           project, clock):
    """Stats count every pin left (Q:pin), so after Alice goes idle they
    report none only if they freed her groups themselves; her heads are
    then under avail for anyone before any claim runs."""
    queue = make_queue(STICKY)
    hold_waiting(driver, queue, project, ALICE, 3)
    assert stats(driver, queue, project)['groups_pinned'] == 3
    clock.advance(STICKY_S)
    assert 'groups_pinned' not in stats(driver, queue, project)
    assert pins_of(raw, queue, project, ALICE) == 0
    assert waiting_for(raw, queue, project, ALICE) == 0
    assert not tracked(raw, queue, project, ALICE)
    avail = keys.queue_prefix(queue, project) + ':avail'
    assert raw.zcard(avail) == 3
    assert names(claim_as(BOB, driver, queue, project)[1]) == [
        'w002', 'w012', 'w022']


@pytest.mark.parametrize('stale', [BATCH, 6 * BATCH])
def test_zaqars_purge_pops_past_more_pins_than_one_pop_frees(
        driver, make_queue, project, stale):
    """Zaqar's purge frees pins of any client, five batches per pop, until
    avail holds what it asks for. ALICE still holds ``stale`` groups she
    emptied (pins outlive their groups while she is active), and they
    come first; BOB's group waits behind them. A pop that used up its
    batches on ALICE's pins once answered empty, and the purge stopped
    with BOB's message left (6 * BATCH; BATCH shows the bound is what
    mattered)."""
    queue = make_queue(dict(STICKY, _message_group_sticky=600))
    for start in range(0, stale, BATCH):
        post(driver, queue, project,
             *[msg('a%d' % n, 1) for n in range(start, start + BATCH)])
    taken = 0
    with sticky.acting_as(ALICE):
        while taken < stale:
            got = driver.message_controller.pop(queue, 20, project=project)
            assert got
            taken += len(got)
    post(driver, queue, project, msg('x', 1), msg('x', 2))
    with sticky.acting_as(BOB):
        got = driver.message_controller.pop(queue, 20, project=project)
    assert names(got) == ['x1']
    assert names(zaqar_purge(driver, queue, project)) == ['x2']
    assert stats(driver, queue, project)['total'] == 0


def test_deleting_a_queue_frees_a_clients_pins_a_batch_per_call(
        driver, make_queue, project, raw, monkeypatch):
    """A sticky client holds a pin for every group it took, which
    outlives the group: queue deletion deleted a client's whole set of
    pins (and the queue's hash of them) in one call, work that grows with
    the groups a tenant created. Now at most a batch per call."""
    queue = make_queue(STICKY)
    hold_emptied(driver, queue, project, ALICE, 5 * BATCH)
    prefix = keys.queue_prefix(queue, project)

    def pins():
        return (raw.hlen(prefix + ':pin')
                + raw.scard(prefix + ':pg:' + ALICE)
                + raw.zcard(prefix + ':pa:' + ALICE))

    assert pins() == 2 * 5 * BATCH
    freed, run = [], driver.message_controller._run

    def counted(script, *args, **kwargs):
        before = pins() if script == 'purge' else None
        result = run(script, *args, **kwargs)
        if before is not None:
            freed.append(before - pins())
        return result

    monkeypatch.setattr(driver.message_controller, '_run', counted)
    driver.message_controller._purge_queue(queue, project)
    assert pins() == 0
    assert max(freed) <= 2 * BATCH, freed
