"""Message groups under competing consumers, real processes (threads on
mongomock): every message is acknowledged once and never handed out
after; each producer's members of a group are handed out in posting
order, a member only once the previous one's delete was sent, or, after
an abandoned claim, the same member again once that claim expired; a
group moved meanwhile keeps these rules across both queues.

On Swift the group rules hold up to the bounded windows of
docs/swift.md, which a test of this size does not hit."""

import collections

import pytest

from tests.multiprocess import helpers
from tests.multiprocess import probes
from tests.multiprocess import workers
from tests.multiprocess.workers import Plan

pytestmark = pytest.mark.slow

GROUPED = {'_message_group_key': 'g'}

# Consumers compete for a backlog of groups. (groups, members each,
# posted while the consumers run, claim limit, idle pause, every how
# many claims each consumer abandons one (0: none), abandoned claims'
# ttl).
COMPETING = {
    # One producer posts a member of every group per post, meanwhile.
    'redis': (['g%d' % i for i in range(12)], 15, True, 5, 0.05,
              (0, 0, 4, 5), 1),
    # Everything posted first, 7 per post.
    'mongodb': (['a', 'b', 'c', 7, 'e'], 12, False, 4, 0.001,
                (0,) * 6, 300),
}
# Producers and consumers at once. (groups of each producer, rounds
# posted each, consumers, claim limit, idle pause).
RACING = {
    'swift-own-groups': ((('a', 'b', 'c'), ('d', 'e', 'f')), 8, 4, 3, 0.1),
    # Posts to a group cross: only each producer's own order is defined.
    'swift-shared-groups': ((('a', 'b', 'c'), ('c', 'b', 'a')), 8, 4, 3,
                            0.1),
    'mongodb-own-groups': (tuple(tuple('p%d-%d' % (i, g) for g in range(3))
                                 for i in range(3)), 10, 5, 4, 0.001),
}


def check_groups(handouts, bodies, posted, claim_ttl):
    """``bodies`` and ``posted`` (ids) of each producer, in posting
    order."""
    helpers.check_refused_acks(handouts, claim_ttl)
    acked = [h.id for h in handouts if h.ack_sent and not h.ack_error]
    assert len(acked) == len(set(acked)), 'acknowledged twice'
    assert sorted(acked) == sorted(mid for ids in posted for mid in ids)
    every = [b for producer in bodies for b in producer]
    by_group = helpers.by(handouts, lambda h: h.body['g'])
    assert set(by_group) == {b['g'] for b in every}
    for group, events in by_group.items():
        events.sort(key=lambda h: (h.ended, h.began))
        producers = {b['p'] for b in every if b['g'] == group}
        for producer in producers:
            # Each producer's members in its posting order.
            assert [h.body['n'] for h in events if h.body['p'] == producer
                    and h.ack_sent and not h.ack_error] == [
                b['n'] for b in every
                if b['g'] == group and b['p'] == producer], (group, producer)
        for prev, nxt in zip(events, events[1:]):
            if prev.abandoned or prev.ack_error:
                # Exclusive: the same member, once the claim had expired.
                assert nxt.id == prev.id, (group, prev, nxt)
                assert nxt.ended >= prev.began + claim_ttl - 0.01, (prev, nxt)
                continue
            # Only after the previous one's delete was sent; never again
            # once acknowledged: with one producer, the next member.
            assert nxt.ended >= prev.ack_sent, (group, prev, nxt)
            assert nxt.id != prev.id, (group, prev, nxt)
            if len(producers) == 1:
                following = [b['n'] for b in every if b['g'] == group]
                assert following.index(nxt.body['n']) == following.index(
                    prev.body['n']) + 1, (group, prev, nxt)


def check_empty(driver, queue, project, backend_name, redis_url):
    counts = driver.message_controller.stats(queue, project)['messages']
    assert (counts['total'], counts['groups']) == (0, 0)
    assert probes.stored_ids(backend_name, driver, queue, project,
                             redis_url) == set()


@pytest.mark.parametrize('backend_name', sorted(COMPETING))
def test_competing_consumers_keep_each_group_in_order(
        team, backend_name, driver, project, redis_url):
    groups, each, meanwhile, limit, pause, abandon, claim_ttl = COMPETING[
        backend_name]
    driver.queue_controller.create('q', metadata=GROUPED, project=project)
    bodies = workers.bodies_of(0, len(groups) * each, groups)
    producers, posted = [], []
    if meanwhile:
        producers = [(len(bodies), len(groups), groups)]
    else:
        posted = [[mid for mid, _ in workers.post_all(driver, 'q', project,
                                                      bodies, 7)]]
    plans = [Plan(limit=limit, pause=pause, claim_ttl=claim_ttl,
                  abandon_every=every) for every in abandon]
    produced, handouts, problems = helpers.run_producers_and_consumers(
        team, 'q', project, producers, plans, plans[0])
    posted += [[mid for mid, _ in ids] for ids in produced]
    assert problems == []
    check_groups(handouts, [bodies], posted, claim_ttl)
    check_empty(driver, 'q', project, backend_name, redis_url)


@pytest.mark.parametrize('backend_name, case', [
    (name.split('-', 1)[0], name) for name in RACING], ids=list(RACING))
def test_consumers_racing_producers_keep_each_group_in_order(
        team, backend_name, driver, project, redis_url, case):
    groups, rounds, consumers, limit, pause = RACING[case]
    driver.queue_controller.create('q', metadata=GROUPED, project=project)
    plan = Plan(limit=limit, pause=pause)
    # Each producer posts one member of each of its groups per post.
    posted, handouts, problems = helpers.run_producers_and_consumers(
        team, 'q', project, [(rounds * len(g), len(g), g) for g in groups],
        [plan] * consumers, plan)
    assert problems == []
    counts = collections.Counter(h.id for h in handouts)
    assert max(counts.values()) == 1, 'a message was delivered twice'
    check_groups(handouts, [workers.bodies_of(p, rounds * len(g), g)
                            for p, g in enumerate(groups)],
                 [[mid for mid, _ in ids] for ids in posted], 60)
    check_empty(driver, 'q', project, backend_name, redis_url)


@pytest.mark.parametrize('backend_name', ['mongodb'])
def test_moving_a_group_under_competing_consumers(team, backend_name,
                                                 driver, project):
    """A group moved while consumers work both queues: every message is
    handed out once, in order, never two of the group at once."""
    for name in ('q', 't'):
        driver.queue_controller.create(name, metadata=GROUPED,
                                       project=project)
    bodies = workers.bodies_of(0, 30, ['a', 'b'])
    posted = [mid for mid, _ in workers.post_all(driver, 'q', project,
                                                 bodies, 7)]
    moved_q, handed, in_target = team.Queue(), team.Queue(), team.Queue()
    moved_all = team.Event()
    plan = Plan(limit=4, pause=0.001)
    team.spawn(workers.move_when_free, 'q', project, 'a', 't', moved_q)
    for _ in range(3):
        team.spawn(workers.consume, 'q', project, plan, moved_all, handed)
    for _ in range(2):
        team.spawn(workers.consume, 't', project, plan, moved_all,
                   in_target)
    team.start()
    moved = team.get(moved_q, helpers.WAIT_S)
    moved_all.set()
    source = [team.get(handed, helpers.WAIT_S)[0] for _ in range(3)]
    target = [team.get(in_target, helpers.WAIT_S)[0] for _ in range(2)]
    team.join()
    assert moved is not None
    target = [h for found in target for h in found]
    check_groups([h for found in source for h in found] + target,
                 [bodies], [posted], 60)
    assert len({h.id for h in target}) == moved
    assert {h.body['g'] for h in target} <= {'a'}
