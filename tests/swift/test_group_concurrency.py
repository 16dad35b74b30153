"""Several real processes posting to and consuming one grouped Swift queue.

The consumers compete; the producers post in rounds, either to groups of
their own (so each group's posting order is well defined) or all to the
same groups (their posts cross: only each producer's own order is
defined). On Swift the group rules hold up to the bounded windows of
docs/swift.md, which a test of this size does not hit: every message is
delivered once, each producer's members of a group in order, and a member
is only handed out after the previous one's delete was sent.
"""

import collections
import time

import pytest

from localstack.factories import swift as swift_factory
from tests.swift import workers

pytestmark = pytest.mark.slow

CONSUMERS = 4
ROUNDS = 8


@pytest.mark.parametrize('groups', [
    (('a', 'b', 'c'), ('d', 'e', 'f')),       # one producer per group
    (('a', 'b', 'c'), ('c', 'b', 'a')),       # posts to a group cross
], ids=['own-groups', 'shared-groups'])
def test_grouped_consumers_keep_order_and_one_in_flight(
        crew, swift_server, redis_url, project, groups):
    uri = swift_factory.swift_uri(swift_server)
    driver = workers.make_driver(uri, redis_url)
    driver.queue_controller.create('grouped', project=project,
                                   metadata={'_message_group_key': 'g'})
    produced, handed = crew.Queue(), crew.Queue()
    start = time.time() + 3  # let every spawned interpreter boot first
    for n, mine in enumerate(groups):
        crew.spawn(workers.produce_grouped, uri, redis_url, 'grouped',
                   project, n, mine, ROUNDS, start, produced)
    for _ in range(CONSUMERS):
        crew.spawn(workers.consume_grouped, uri, redis_url, 'grouped',
                   project, start, handed)
    posted = [mid for _ in groups
              for mid in crew.get(produced, timeout=120)]
    handouts = [h for _ in range(CONSUMERS)
                for h in crew.get(handed, timeout=300)]
    crew.join()
    counts = collections.Counter(h[2] for h in handouts)
    assert set(counts) == set(posted), 'a message was never delivered'
    assert max(counts.values()) == 1, 'a message was delivered twice'
    by_group = collections.defaultdict(list)
    for group, tag, _, returned, sent in handouts:
        by_group[group].append((returned, tag, sent))
    for group, deliveries in by_group.items():
        deliveries.sort()
        for producer in {tag[0] for _, tag, _ in deliveries}:
            assert [tag[1] for _, tag, _ in deliveries
                    if tag[0] == producer] == list(range(ROUNDS)), group
        for (_, before, sent), (returned, tag, _) in zip(deliveries,
                                                         deliveries[1:]):
            assert returned >= sent, (
                '%s of group %s handed out while %s was in flight'
                % (tag, group, before))
    counts = driver.message_controller.stats('grouped', project)['messages']
    assert (counts['total'], counts['groups']) == (0, 0)
