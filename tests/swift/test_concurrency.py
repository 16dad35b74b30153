"""Several real processes posting and claiming on one real Swift queue.

Claim exclusivity on Swift rests on one thing: ``PUT l/<id>/<attempt>`` with
``If-None-Match: *`` succeeds for exactly one creator. These tests check the
consequences with real competing processes.
"""

import collections
import time

import pytest

from localstack.factories import swift as swift_factory
from tests.swift import workers

pytestmark = pytest.mark.slow

CONSUMERS = 4
PRODUCERS = 2
PER_PRODUCER = 60


def run(crew, swift_server, redis_url, queue, project, abandon_every,
        claim_ttl):
    uri = swift_factory.swift_uri(swift_server)
    driver = workers.make_driver(uri, redis_url)
    driver.queue_controller.create(queue, project=project)
    produced, handed, posted_all = crew.Queue(), crew.Queue(), crew.Event()
    start = time.time() + 3  # let every spawned interpreter boot first
    for _ in range(PRODUCERS):
        crew.spawn(workers.produce, uri, redis_url, queue, project,
                   PER_PRODUCER, start, produced)
    for _ in range(CONSUMERS):
        crew.spawn(workers.consume, uri, redis_url, queue, project,
                   abandon_every, claim_ttl, start, posted_all, handed)
    posted = [mid for _ in range(PRODUCERS)
              for mid in crew.get(produced, timeout=120)]
    posted_all.set()
    handouts = [h for _ in range(CONSUMERS)
                for h in crew.get(handed, timeout=workers.CONSUME_FOR_S + 60)]
    crew.join()
    return driver, posted, handouts


def test_competing_consumers_never_share_a_message_and_lose_none(
        crew, swift_server, redis_url, project):
    driver, posted, handouts = run(crew, swift_server, redis_url, 'race',
                                   project, 0, 60)
    assert len(set(posted)) == PRODUCERS * PER_PRODUCER
    counts = collections.Counter(handout[0] for handout in handouts)
    assert set(counts) == set(posted), 'a posted message was never delivered'
    assert max(counts.values()) == 1, 'a message was delivered twice'
    assert driver.message_controller.stats('race', project)['messages']['total'] == 0


def test_abandoned_claims_are_redelivered_never_concurrently(
        crew, swift_server, redis_url, project):
    # Long enough for a claim to finish within its safety margin (a
    # quarter of the ttl, at most 2 s) on a loaded machine: a claim that
    # cannot hands its messages back and returns none. With 1 s no claim
    # ever did while the machine ran several suites at once (load 10),
    # with 6 s few did at load 30.
    claim_ttl = 10
    driver, posted, handouts = run(crew, swift_server, redis_url, 'crashy',
                                   project, 3, claim_ttl)
    by_message = collections.defaultdict(list)
    for mid, claim_id, count, began, ended in handouts:
        by_message[mid].append((count, began, ended, claim_id))
    assert set(by_message) == set(posted), (
        'a message was lost', len(set(posted) - set(by_message)),
        driver.message_controller.stats('crashy', project)['messages'])
    for mid, deliveries in by_message.items():
        # In claim-count order: each delivery is a later attempt. (Not
        # in the order the claim requests began: a loaded worker can send
        # a claim before another's and win the message after it.)
        deliveries.sort()
        counts = [d[0] for d in deliveries]
        assert len(set(counts)) == len(counts), (mid, deliveries)
        for first, second in zip(deliveries, deliveries[1:]):
            # A claim's expiry counts from when its request began (that is
            # when the driver reads the clock); a redelivery can only come
            # out of a claim request that ends after that expiry.
            assert second[2] - first[1] >= claim_ttl - 0.05, (
                mid, deliveries)
    assert driver.message_controller.stats('crashy', project)['messages']['total'] == 0
