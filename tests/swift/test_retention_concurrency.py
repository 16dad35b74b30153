"""Retention under load, real processes on one real Swift queue.

Producers overflow a ``length``-bounded queue while consumers claim and
delete and two cleanup processes remove what retention dropped. Checked:
no claimed message is removed, no message is handed out after it fell out
of retention (as far as the producers' own order proves it), none is
removed or counted twice, and every message is consumed, removed and
counted, or still there.
"""

import collections
import time
from urllib import parse

import pytest

from localstack.factories import swift as swift_factory
from tests.swift import retention_workers as workers
from tests.swift.workers import make_driver

pytestmark = pytest.mark.slow

LENGTH = 15
PRODUCERS, PER_PRODUCER = 2, 100
CONSUMERS, CLEANERS = 2, 2


def test_overflowing_producers_consumers_and_two_cleaners(
        crew, swift_server, redis_url, project):
    uri = swift_factory.swift_uri(swift_server)
    driver = make_driver(uri, redis_url)
    queue = 'kept'
    driver.queue_controller.create(
        queue, metadata={'_retention': {'length': LENGTH}}, project=project)
    produced, consumed, cleaned = crew.Queue(), crew.Queue(), crew.Queue()
    stop = crew.Event()
    start = time.time() + 3   # let every spawned interpreter boot first
    common = (uri, redis_url, queue, project)
    for _ in range(PRODUCERS):
        crew.spawn(workers.produce, *common, PER_PRODUCER, start, produced)
    for _ in range(CONSUMERS):
        crew.spawn(workers.consume, *common, start, consumed)
    for _ in range(CLEANERS):
        crew.spawn(workers.clean, *common, start, stop, cleaned)
    posted = [crew.get(produced, timeout=300) for _ in range(PRODUCERS)]
    results = [crew.get(consumed, timeout=300) for _ in range(CONSUMERS)]
    stop.set()
    reports = [crew.get(cleaned, timeout=300) for _ in range(CLEANERS)]
    won = sum(removed for removed, _ in reports)
    failed_passes = sum(failed for _, failed in reports)
    crew.join()

    handouts = [h for hs, _ in results for h in hs]
    lost = [mid for _, ls in results for mid in ls]
    assert lost == [], 'a claimed message was removed'
    counts = collections.Counter(mid for mid, _, _ in handouts)
    assert max(counts.values(), default=1) == 1, 'handed out twice'

    qs = driver.queue_state(queue, project)
    tallies = [e['name'].rsplit('/', 1)[1]
               for e in driver.store.listing_all(qs.c, 'n/')]
    removed_ids = set(tallies)
    assert len(tallies) == len(removed_ids), 'a removal counted twice'
    stats = driver.message_controller.stats(queue, project)
    assert stats['retention']['removed'] == len(removed_ids)
    # Consumers only ever claim: every removal was a cleaner's, and each
    # was reported by the pass that made it, unless that pass failed
    # later (its answer lost with the removals it had made).
    if failed_passes:
        assert won <= len(removed_ids)
    else:
        assert won == len(removed_ids)
    assert not removed_ids & set(counts), 'consumed and removed'
    left = {parse.unquote(e['name'][2:])
            for e in driver.store.listing_all(qs.c, 'm/')}
    every = {mid for batch in posted for mid, _ in batch}
    assert len(every) == PRODUCERS * PER_PRODUCER
    assert every == set(counts) | removed_ids | left, 'a message was lost'
    assert not left & (set(counts) | removed_ids)
    assert len(left) <= LENGTH
    assert removed_ids, 'the producers never overflowed the queue'
    assert counts, 'the consumers never got a message'

    first_handout = {mid: (began, ended) for mid, began, ended in handouts}
    for batch in posted:
        for index, (mid, _) in enumerate(batch):
            if mid not in first_handout:
                continue
            began, ended = first_handout[mid]
            # Messages of the same producer posted after this one (so
            # newer), posted before its claim began, not handed out
            # before its claim ended and never removed, were all waiting
            # unclaimed: LENGTH of them means it had fallen out.
            newer = [n for n, at in batch[index + 1:] if at < began
                     and n not in removed_ids
                     and first_handout.get(n, (ended + 1,))[0] > ended]
            assert len(newer) < LENGTH, (
                'handed out after it fell out of retention', mid)
