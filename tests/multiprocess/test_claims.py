"""Competing producers and consumers on one queue, real processes (threads
on mongomock): every message is handed out once and none is lost; an
abandoned claim's messages come back only after it expired; concurrent
claims each hold their own messages; concurrent posts take unique
positions in each poster's order.

Each test runs on the backends it ran on as a per-backend copy, at that
copy's sizes (Swift is slow, mongomock's threads share one interpreter).
"""

import collections

import pytest

from tests.multiprocess import helpers
from tests.multiprocess import probes
from tests.multiprocess import workers
from tests.multiprocess.workers import Plan

pytestmark = pytest.mark.slow

# (producers, messages each, consumers, claim limit, pause after an empty
# claim).
SIZES = {'redis': (2, 400, 4, 7, 0.1), 'swift': (2, 60, 4, 5, 0.1),
         'mongodb': (2, 100, 4, 5, 0.1)}
# Redelivery: Swift needs a claim to finish within its safety margin (a
# quarter of the ttl, at most 2 s) on a loaded machine, or it hands its
# messages back and returns none: with 1 s no claim ever did at load 10,
# with 6 s few did at load 30.
ABANDONED_TTL = {'redis': 1, 'swift': 10, 'mongodb': 2}


def run(team, backend_name, driver, queue, project, plan):
    producers, each, consumers, plan.limit, plan.pause = SIZES[backend_name]
    driver.queue_controller.create(queue, project=project)
    posted, handouts, problems = helpers.run_producers_and_consumers(
        team, queue, project, [(each, 10, ())] * producers,
        [plan] * consumers, plan)
    assert problems == []
    posted = helpers.ids(posted)
    assert len(set(posted)) == producers * each
    return posted, handouts


@pytest.mark.parametrize('backend_name', ['redis', 'swift'])
def test_competing_consumers_get_each_message_once_and_lose_none(
        team, backend_name, driver, project):
    posted, handouts = run(team, backend_name, driver, 'race', project,
                           Plan(claim_ttl=60))
    assert [h for h in handouts if h.ack_error] == []
    counts = collections.Counter(h.id for h in handouts)
    assert set(counts) == set(posted), 'a posted message was never delivered'
    assert max(counts.values()) == 1, 'a message was delivered twice'
    assert driver.message_controller.stats(
        'race', project)['messages']['total'] == 0


@pytest.mark.parametrize('backend_name', ['redis', 'swift', 'mongodb'])
def test_abandoned_claims_are_redelivered_never_concurrently(
        team, backend_name, driver, project):
    claim_ttl = ABANDONED_TTL[backend_name]
    posted, handouts = run(team, backend_name, driver, 'crashy', project,
                           Plan(claim_ttl=claim_ttl, abandon_every=3))
    by_message = helpers.by(handouts, lambda h: h.id)
    assert set(by_message) == set(posted), (
        'a message was lost', len(set(posted) - set(by_message)),
        driver.message_controller.stats('crashy', project)['messages'])
    helpers.check_refused_acks(handouts, claim_ttl)
    for mid, deliveries in by_message.items():
        # In claim-count order: each delivery is a later attempt. (Not
        # in the order the claim requests began: a loaded worker can send
        # a claim before another's and win the message after it.)
        deliveries.sort(key=lambda h: h.claim_count)
        counts = [h.claim_count for h in deliveries]
        assert len(set(counts)) == len(counts), (mid, deliveries)
        for first, second in zip(deliveries, deliveries[1:]):
            # A claim's expiry counts from when the store read its clock,
            # after the request began; a redelivery can only come out of
            # a claim request that ends after that expiry.
            assert second.ended - first.began >= claim_ttl - 0.05, (
                mid, deliveries)
        if backend_name == 'redis':
            # Redis reads its clock as it runs the claim, just before it
            # returns: redeliveries are a ttl apart in return times too
            # (allowing for the consumer's own scheduling slack).
            returned = sorted(h.ended for h in deliveries)
            for first, second in zip(returned, returned[1:]):
                assert second - first >= claim_ttl - 0.25, (mid, deliveries)
    assert driver.message_controller.stats(
        'crashy', project)['messages']['total'] == 0


@pytest.mark.parametrize('backend_name', ['mongodb'])
@pytest.mark.parametrize('limit', [3, 1])
def test_concurrent_claims_each_hold_their_own_messages(
        team, backend_name, driver, project, redis_url, limit):
    """Claims that are never deleted: each message is held by the one
    claim that got it, claimed once. A claim of one takes its message
    with a sorted findAndModify alone (claims.py), a claim of 3 reads
    candidates first."""
    driver.queue_controller.create('held', project=project)
    posted = [mid for mid, _ in workers.post_all(
        driver, 'held', project, workers.bodies_of(0, 150), 5)]
    plan = Plan(limit=limit, claim_ttl=300, abandon_every=1,
                until_empty=False, pause=0)
    _, handouts, problems = helpers.run_producers_and_consumers(
        team, 'held', project, [], [plan] * 6, plan)
    assert problems == []
    handed_ids = [h.id for h in handouts]
    assert len(handed_ids) == len(set(handed_ids)), 'handed out twice'
    assert sorted(handed_ids) == sorted(posted)
    owner = {h.id: h.claim_id for h in handouts}
    held = driver.message_controller.bulk_get('held', posted,
                                              project=project)
    assert sorted((m['id'], m['claim_id'], m['claim_count']) for m in held) \
        == sorted((mid, owner[mid], 1) for mid in posted)
    assert probes.stored_ids(backend_name, driver, 'held', project,
                             redis_url) == set(posted)


@pytest.mark.parametrize('backend_name', ['mongodb'])
@pytest.mark.parametrize('posters, each', [(6, 40), (8, 1)],
                         ids=['posts', 'first-posts-to-a-new-queue'])
def test_concurrent_posts_take_unique_positions_in_posting_order(
        team, backend_name, driver, project, redis_url, posters, each):
    """Posters released at once: every message gets its own position,
    in each poster's order (with one post each, their first posts race
    for the new queue's counter)."""
    driver.queue_controller.create('q', project=project)
    produced = team.Queue()
    for poster in range(posters):
        team.spawn(workers.produce, 'q', project, poster, each, 5, (),
                   produced)
    team.start()
    posted = [[mid for mid, _ in team.get(produced, helpers.WAIT_S)]
              for _ in range(posters)]
    team.join()
    every = [mid for ids in posted for mid in ids]
    assert len(every) == len(set(every)) == posters * each
    positions = helpers.positions(driver, 'q', project)
    assert set(positions) == set(every)
    assert len(set(positions.values())) == len(every)
    for ids in posted:
        order = [positions[mid] for mid in ids]
        assert order == sorted(order)
    assert probes.stored_ids(backend_name, driver, 'q', project,
                             redis_url) == set(every)
    probes.check_posted_count(backend_name, driver, 'q', project, len(every))
