"""Retention under concurrency, with real processes on a real redis-server:
producers overflow a length-bounded queue while consumers claim and two
cleanup processes run. Every message ends up consumed once, removed by
retention and counted once, or still there; no claimed message is removed;
no read shows more than the queue keeps."""

import collections

import pytest
import redis as redis_py

from tests.contract.helpers import listed
from tests.redis import retention_workers
from tests.redis import workers
from zaqar_delay.drivers.redis import keys

pytestmark = pytest.mark.slow

PRODUCERS, PER_PRODUCER, CONSUMERS, CLEANERS = 2, 600, 2, 2
LENGTH = 40


@pytest.mark.parametrize('groups', [0, 5])
def test_overflow_with_consumers_and_two_cleaners(crew, redis_url, project,
                                                  groups):
    metadata = {'_retention': {'length': LENGTH}}
    if groups:
        metadata['_message_group_key'] = 'g'
    driver = workers.make_driver(redis_url)
    driver.queue_controller.create('q', metadata=metadata, project=project)
    done = crew.Event()
    posted_q, handed_q, cleaned_q = crew.Queue(), crew.Queue(), crew.Queue()
    for _ in range(PRODUCERS):
        crew.spawn(retention_workers.produce, redis_url, 'q', project,
                   PER_PRODUCER, groups, posted_q)
    for _ in range(CONSUMERS):
        crew.spawn(retention_workers.consume, redis_url, 'q', project,
                   LENGTH, done, handed_q)
    for _ in range(CLEANERS):
        crew.spawn(retention_workers.clean, redis_url, 'q', project, done,
                   cleaned_q)
    posted = [mid for _ in range(PRODUCERS)
              for mid in crew.get(posted_q, timeout=300)]
    done.set()
    results = [crew.get(handed_q, timeout=300) for _ in range(CONSUMERS)]
    cleaned = sum(crew.get(cleaned_q, timeout=300) for _ in range(CLEANERS))
    crew.join()

    problems = [p for _, found in results for p in found]
    assert problems == []
    handouts = [h for found, _ in results for h in found]
    counts = collections.Counter(mid for mid, _, _, _ in handouts)
    assert not counts or max(counts.values()) == 1, 'handed out twice'
    consumed = set(counts)
    remaining = {m['id'] for m in listed(driver, 'q', project,
                                         include_claimed=True)}
    removed = set(posted) - consumed - remaining
    assert len(set(posted)) == PRODUCERS * PER_PRODUCER
    assert consumed | remaining <= set(posted)
    assert not consumed & remaining
    stats = driver.message_controller.stats('q', project)
    # Counted exactly once each: the counter is the number of messages
    # that are gone without having been consumed.
    assert stats['retention']['removed'] == len(removed)
    assert removed, 'the producers were meant to overflow the queue'
    assert cleaned <= len(removed)
    # Each one was removed by retention (remembered like a deleted id),
    # not lost some other way.
    raw = redis_py.Redis.from_url(redis_url)
    deleted = dict(zip(keys.QUEUE_KEY_SUFFIXES,
                       keys.queue_keys('q', project)))['deleted']
    buried = {m.decode() for m in raw.zrange(deleted, 0, -1)}
    assert removed <= buried
    assert len(remaining) <= LENGTH
    if groups:
        # A group's next member is handed out only after its head was
        # deleted (after that hand-out returned): by hand-out time, each
        # group's positions only grow, whatever retention dropped.
        by_group = collections.defaultdict(list)
        for _, position, group, at in sorted(handouts, key=lambda h: h[3]):
            by_group[group].append(position)
        for group, positions in by_group.items():
            assert positions == sorted(positions), group
