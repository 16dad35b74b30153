"""Persistent consumers under concurrency, real processes (threads on
mongomock): racing updates of one consumer only move it forward and add
up; two consumers with ``consumers_required: 2`` read while producers
post and two cleanup processes run: no message is removed before both
acknowledged it (each consumer sees every message once, in position
order, nothing lost), none is returned after, and every message ends up
removed and counted once."""

import random
import uuid

import pytest

from tests.contract.helpers import listed
from tests.multiprocess import helpers
from tests.multiprocess import probes
from tests.multiprocess import team as team_module
from tests.multiprocess import test_retention
from tests.multiprocess import workers
from zaqar_delay import consumers

pytestmark = pytest.mark.slow

A = str(uuid.UUID('aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa'))
B = str(uuid.UUID('bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb'))
# (updaters, updates each); Swift is slow.
UPDATES = {'redis': (4, 200), 'mongodb': (4, 50), 'swift': (3, 15)}
# (messages per producer posted ``batch`` at a time, readers' page size,
# empty pages that end a reader, watcher's pause); Swift is slow.
READ = {'redis': (300, 10, 10, 20, 0.01), 'mongodb': (60, 5, 5, 20, 0.01),
        'swift': (40, 10, 10, 10, 0.05), 'swift-index': (12, 4, 4, 6, 0.05)}
PRODUCERS = 2
# Where only the cleaners remove what both consumers read (MongoDB also
# removes some as it serves reads).
CLEANUP_ALONE_REMOVES_READ = {'redis', 'swift'}


def subscribed_queue(driver, project, metadata, *consume_ids):
    driver.queue_controller.create('q', metadata=metadata, project=project)
    for consume_id in consume_ids:
        driver.subscription_controller.create(
            'q', consumers.PREFIX + consume_id, 3600, {}, project=project)


@pytest.mark.parametrize('backend_name', ['redis', 'mongodb', 'swift'])
def test_racing_updates_only_move_forward_and_add_up(team, backend_name,
                                                     driver, project):
    subscribed_queue(driver, project, {}, A)
    updaters, each = UPDATES[backend_name]
    rng = random.Random(11)
    plans = [[(rng.randrange(1000), rng.randrange(1000))
              for _ in range(each)] for _ in range(updaters)]
    results = team.Queue()
    for plan in plans:
        team.spawn(workers.update_consumer, 'q', project, A, plan, results)
    team.start()
    sent = sum(team.get(results, helpers.WAIT_S) for _ in plans)
    assert sent == updaters * each
    team.join()
    _, found = driver.message_controller._consumer('q', project, A)
    assert found.cursor == max(a for plan in plans for a, _ in plan)
    assert found.handed == max(h for plan in plans for _, h in plan)
    # Every backend adds an update's lost only when it moves ``handed``
    # forward (a page handed again counts once): at least the first did.
    assert 1 <= found.lost <= sent


@pytest.fixture
def read_cut_index_from(request, conf, driver):
    """Swift's ``read_cut_index_from`` for the test's processes, where
    the test gives one."""
    if request.param is not None:
        conf.set_override('read_cut_index_from', request.param,
                          group=team_module.store_group('swift'))
    return request.param


# Swift with 0: two consumers are "many", and the read cut walks the
# cursor index (readers.py) while they write it.
@pytest.mark.parametrize('backend_name, read_cut_index_from', [
    ('redis', None), ('mongodb', None), ('swift', None), ('swift', 0)],
    ids=['redis', 'mongodb', 'swift', 'swift-index'],
    indirect=['read_cut_index_from'])
def test_read_by_all_with_producers_and_cleaners(
        read_cut_index_from, team, backend_name, driver, project,
        redis_url):
    each, batch, limit, idle_rounds, pause = READ[
        backend_name if read_cut_index_from is None else 'swift-index']
    subscribed_queue(driver, project,
                     {'_retention': {'consumers_required': 2}}, A, B)
    posted_all, read_done = team.Event(), team.Event()
    posted_q, seen_q, watch_q = team.Queue(), team.Queue(), team.Queue()
    for producer in range(PRODUCERS):
        team.spawn(workers.produce, 'q', project, producer, each, batch, (),
                   posted_q)
    # On the index, B reads smaller pages: it lags, and the cut must
    # follow the lower cursor, whichever it is.
    limits = {A: limit, B: limit if read_cut_index_from is None else 2}
    for consume_id in (A, B):
        team.spawn(workers.read, 'q', project, consume_id,
                   limits[consume_id], idle_rounds, posted_all, seen_q)
    cleaned_q = test_retention.start_cleaners(team, 'q', project,
                                              backend_name, read_done)
    team.spawn(workers.watch, 'q', project, 2, pause, read_done, watch_q)
    team.start()
    posted = helpers.ids([team.get(posted_q, helpers.WAIT_S)
                          for _ in range(PRODUCERS)])
    posted_all.set()
    seen = dict(team.get(seen_q, helpers.WAIT_S) for _ in (A, B))
    read_done.set()
    cleaned, failed_passes = test_retention.cleaners_report(team, cleaned_q)
    problems = team.get(watch_q, helpers.WAIT_S)
    team.join()

    assert problems == [], 'returned after both acknowledged it'
    for consume_id in (A, B):
        ids = [mid for mid, _ in seen[consume_id]]
        positions = [pos for _, pos in seen[consume_id]]
        assert sorted(ids) == sorted(posted), 'removed before both read it'
        assert positions == sorted(positions)
        assert len(set(ids)) == len(ids)
    _, found = driver.message_controller._consumers('q', project)
    assert [c.lost for c in found] == [0, 0]
    # Each reader's idle listings acknowledged its last page: everything
    # is read by all and goes, each message counted once.
    assert {c.cursor for c in found} == {max(pos for _, pos in seen[A])}
    # None is returned after: both acknowledged everything.
    assert listed(driver, 'q', project, include_claimed=True,
                  include_delayed=True) == []
    cleaned += driver.clean_queue('q', project)
    stats = driver.message_controller.stats('q', project)
    assert stats['messages']['total'] == 0
    assert stats['retention']['removed'] == len(posted)
    test_retention.check_cleaned(backend_name in CLEANUP_ALONE_REMOVES_READ,
                                 cleaned, failed_passes, len(posted))
    assert probes.stored_ids(backend_name, driver, 'q', project,
                             redis_url) == set()
