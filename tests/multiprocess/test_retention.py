"""Retention under concurrency, real processes (threads on mongomock):
producers overflow a length-bounded queue while consumers claim and two
cleanup processes run. Every message ends up consumed once, removed by
retention and counted once, or still there; no claimed message is
removed; no read shows more than the queue keeps; none is handed out
after it fell out of retention (as far as the producers' order proves,
and on MongoDB against the length floor read before each claim)."""

import collections

import pytest

from tests.multiprocess import helpers
from tests.multiprocess import probes
from tests.multiprocess.workers import Plan
from tests.multiprocess import workers

pytestmark = pytest.mark.slow

PRODUCERS, CLEANERS = 2, 2


# One backend's run: ``length`` kept, ``each`` messages per producer
# posted ``batch`` at a time, ``consumers`` claiming ``limit`` at a time
# for ``claim_ttl`` (pausing ``pause`` after an empty claim), cleaners
# stepping ``clean_batch`` messages (None: the configured default).
Sizes = collections.namedtuple('Sizes', (
    'length', 'each', 'batch', 'consumers', 'limit', 'claim_ttl', 'pause',
    'clean_batch'))

SIZES = {
    'redis': Sizes(40, 600, 10, 2, 5, 60, 0.05, 7),
    # Swift is slow; each cleanup step lists the queue, so its cleaners
    # keep the default step.
    'swift': Sizes(15, 100, 10, 2, 3, 60, 0.1, None),
    'mongodb': Sizes(20, 150, 5, 3, 3, 300, 0.002, 7),
}
# A cleanup pass that fails on a Swift error is tried again, as
# zaqar-delay-gc does; elsewhere a failing pass fails the test.
RETRY_CLEANS = {'swift'}
# Where only cleanup passes remove what retention dropped (Redis and
# MongoDB also remove some as they serve claims or reads).
ONLY_CLEANUP_REMOVES = {'swift'}
# Where no listing shows more free messages than ``length``. Not on
# MongoDB: its listing reads the window before the page, and posts
# landing in between are listed too.
LISTINGS_WITHIN_LENGTH = {'redis'}


def start_cleaners(team, queue, project, backend_name, stop):
    cleaned = team.Queue()
    for _ in range(CLEANERS):
        team.spawn(workers.clean, queue, project,
                   SIZES[backend_name].clean_batch,
                   backend_name in RETRY_CLEANS, stop, cleaned)
    return cleaned


def cleaners_report(team, cleaned):
    """(messages the cleaners' passes reported removed, failed passes)."""
    reports = [team.get(cleaned, helpers.WAIT_S) for _ in range(CLEANERS)]
    return (sum(removed for removed, _ in reports),
            sum(failed for _, failed in reports))


def check_cleaned(exact, cleaned, failed_passes, removed):
    """Where only cleanup passes remove (``exact``), each removal was
    reported by the pass that made it, unless that pass failed later (its
    answer lost with the removals it had made)."""
    if exact and not failed_passes:
        assert cleaned == removed
    else:
        assert cleaned <= removed


@pytest.mark.parametrize('backend_name, groups', [
    ('redis', 0), ('redis', 5), ('swift', 0), ('mongodb', 0)])
def test_overflow_with_consumers_and_two_cleaners(
        team, backend_name, driver, project, redis_url, groups):
    sizes = SIZES[backend_name]
    metadata = {'_retention': {'length': sizes.length}}
    if groups:
        metadata['_message_group_key'] = 'g'
    driver.queue_controller.create('q', metadata=metadata, project=project)
    stop = team.Event()
    cleaned_q = start_cleaners(team, 'q', project, backend_name, stop)
    # With groups, claims come back empty while other consumers hold
    # every group's head, so these read on until the queue is empty.
    plan = Plan(limit=sizes.limit, claim_ttl=sizes.claim_ttl,
                pause=sizes.pause, until_empty=bool(groups),
                read_claimed=True,
                check_floor=backend_name == 'mongodb', length=(
                    sizes.length if backend_name in LISTINGS_WITHIN_LENGTH
                    else None))
    posted, handouts, problems = helpers.run_producers_and_consumers(
        team, 'q', project,
        [(sizes.each, sizes.batch, tuple(range(groups)))] * PRODUCERS,
        [plan] * sizes.consumers, plan, stop=stop)
    cleaned, failed_passes = cleaners_report(team, cleaned_q)

    assert problems == []
    assert [h for h in handouts if h.ack_error] == []
    counts = collections.Counter(h.id for h in handouts)
    assert not counts or max(counts.values()) == 1, 'handed out twice'
    every = set(helpers.ids(posted))
    assert len(every) == PRODUCERS * sizes.each
    consumed = set(counts)
    remaining = set(helpers.positions(driver, 'q', project))
    removed = every - consumed - remaining
    assert consumed | remaining <= every
    assert not consumed & remaining
    assert len(remaining) <= sizes.length
    if plan.until_empty:
        assert not remaining, 'the consumers stopped before the end'
    assert removed, 'the producers were meant to overflow the queue'
    assert consumed, 'the consumers never got a message'
    # Counted exactly once each: the counter is the number of messages
    # that are gone without having been consumed.
    stats = driver.message_controller.stats('q', project)
    assert stats['retention']['removed'] == len(removed)
    check_cleaned(backend_name in ONLY_CLEANUP_REMOVES, cleaned,
                  failed_passes, len(removed))
    # Nothing else is left in the store, and each removal was recorded
    # as removed by retention, not lost some other way.
    assert probes.stored_ids(backend_name, driver, 'q', project,
                             redis_url) == remaining
    probes.check_removal_records(backend_name, driver, 'q', project,
                                 removed, redis_url)
    check_never_handed_out_after_falling_out(posted, handouts, removed,
                                             sizes.length)
    if groups:
        # A group's next member is handed out only after its head was
        # deleted (after that hand-out returned): by hand-out time, each
        # group's positions only grow, whatever retention dropped.
        by_group = helpers.by(sorted(handouts, key=lambda h: h.ended),
                              lambda h: h.body['g'])
        for group, events in by_group.items():
            positions = [h.position for h in events]
            assert positions == sorted(positions), group


def check_never_handed_out_after_falling_out(posted, handouts, removed,
                                             length):
    first_handout = {h.id: (h.began, h.ended) for h in handouts}
    for batch in posted:
        for index, (mid, _) in enumerate(batch):
            if mid not in first_handout:
                continue
            began, ended = first_handout[mid]
            # Messages of the same producer posted after this one (so
            # newer), posted before its claim began, not handed out
            # before its claim ended and never removed, were all waiting
            # unclaimed: ``length`` of them means it had fallen out.
            newer = [n for n, at in batch[index + 1:] if at < began
                     and n not in removed
                     and first_handout.get(n, (ended + 1,))[0] > ended]
            assert len(newer) < length, (
                'handed out after it fell out of retention', mid)
