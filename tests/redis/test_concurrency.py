"""Several real processes claiming from one queue on a real redis-server."""

import collections

import pytest

from tests.redis import workers

pytestmark = pytest.mark.slow

CONSUMERS = 4
PER_PRODUCER = 400
PRODUCERS = 2


def run(crew, redis_url, queue, project, abandon_every, claim_ttl):
    driver = workers.make_driver(redis_url)
    driver.queue_controller.create(queue, project=project)
    produced, handed = crew.Queue(), crew.Queue()
    for _ in range(PRODUCERS):
        crew.spawn(workers.produce, redis_url, queue, project, PER_PRODUCER,
                   produced)
    for _ in range(CONSUMERS):
        crew.spawn(workers.consume, redis_url, queue, project, abandon_every,
                   claim_ttl, handed)
    posted = [mid for _ in range(PRODUCERS)
              for mid in crew.get(produced, timeout=120)]
    handouts = [h for _ in range(CONSUMERS)
                for h in crew.get(handed, timeout=300)]
    crew.join()
    return driver, posted, handouts


def test_competing_consumers_get_each_message_once_and_lose_none(
        crew, redis_url, project):
    driver, posted, handouts = run(crew, redis_url, 'race', project, 0, 60)
    assert len(set(posted)) == PRODUCERS * PER_PRODUCER
    counts = collections.Counter(mid for mid, _, _ in handouts)
    assert set(counts) == set(posted), 'a posted message was never delivered'
    assert max(counts.values()) == 1, 'a message was delivered twice'
    assert driver.message_controller.stats('race', project)['messages']['total'] == 0


def test_abandoned_claims_are_redelivered_never_concurrently(
        crew, redis_url, project):
    claim_ttl = 1
    driver, posted, handouts = run(crew, redis_url, 'crashy', project, 3,
                                   claim_ttl)
    by_message = collections.defaultdict(list)
    for mid, claim_id, at in handouts:
        by_message[mid].append((at, claim_id))
    assert set(by_message) == set(posted), 'a message was lost'
    for mid, deliveries in by_message.items():
        deliveries.sort()
        for (first, _), (second, _) in zip(deliveries, deliveries[1:]):
            # Hand-out times are taken by the consumers after the claim
            # returns; a re-delivery can only follow the previous claim's
            # expiry (allowing for the consumer's own scheduling slack).
            assert second - first >= claim_ttl - 0.25, (mid, deliveries)
    assert driver.message_controller.stats('crashy', project)['messages']['total'] == 0
