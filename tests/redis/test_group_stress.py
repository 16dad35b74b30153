"""Message groups under competing real processes on a real redis-server.

Several consumers claim from one grouped queue; some abandon a share of
their claims (as crashed consumers would). Every hand-out and delete is
recorded with the wall-clock time before the request went out and after it
came back, which brackets the moment Redis executed it, and the test checks
the group invariant against those brackets.
"""

import collections

import pytest

from tests.redis import workers

pytestmark = pytest.mark.slow

GROUPS = ['g%d' % i for i in range(12)]
PER_GROUP = 15
CLAIM_TTL = 1


def test_group_order_and_exclusivity_hold_across_processes(crew, redis_url,
                                                           project):
    driver = workers.make_driver(redis_url)
    driver.queue_controller.create(
        'stress', metadata={'_message_group_key': 'g'}, project=project)
    produced, handed = crew.Queue(), crew.Queue()
    crew.spawn(workers.produce_groups, redis_url, 'stress', project, GROUPS,
               PER_GROUP, produced)
    consumers = [crew.spawn(workers.consume_groups, redis_url, 'stress',
                            project, abandon, CLAIM_TTL, handed)
                 for abandon in (0, 0, 4, 5)]
    assert crew.get(produced, timeout=120) == len(GROUPS) * PER_GROUP
    handouts, acks = [], {}
    for _ in consumers:
        got, acked = crew.get(handed, timeout=300)
        handouts += got
        acks.update(acked)
    crew.join()

    by_group = collections.defaultdict(list)
    for group, n, mid, before, after, abandoned in handouts:
        by_group[group].append((after, before, n, mid, abandoned))
    assert set(by_group) == set(GROUPS)
    for group, events in by_group.items():
        events.sort()
        acked = [n for _, _, n, mid, abandoned in events if not abandoned]
        assert acked == list(range(PER_GROUP)), (group, acked)
        for prev, nxt in zip(events, events[1:]):
            _, prev_before, prev_n, prev_id, prev_abandoned = prev
            next_after, _, next_n, _, _ = nxt
            if prev_abandoned:
                # Exclusive: redelivered only once the claim had expired.
                assert next_n == prev_n
                assert next_after >= prev_before + CLAIM_TTL - 0.01
            else:
                # In order, and only after the previous one was deleted.
                assert next_n == prev_n + 1
                assert next_after >= acks[prev_id]
    assert driver.message_controller.stats('stress', project)['messages']['total'] == 0
