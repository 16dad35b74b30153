"""Concurrent advances of one headless group promote exactly one head,
and sticky consumers each keep their groups (MongoDB only for now).
Threads on mongomock, spawned processes on a real server
(ZAQAR_DELAY_TEST_MONGODB_URI). The group rules under competing
consumers on every backend are in tests/multiprocess/test_groups.py."""

import collections
import itertools

import pytest

from tests.mongodb import workers
from zaqar_delay.drivers.mongodb import fields

pytestmark = pytest.mark.usefixtures('busy_switching')

GROUPED = {'_message_group_key': 'g'}


def check_groups(records, posted, groups, per_group):
    """Every message handed out once; per group: in posting order, and
    never two in flight at once."""
    ids = [record[2] for record in records]
    assert len(ids) == len(set(ids)), 'a message was handed out twice'
    assert sorted(ids) == sorted(posted)
    by_group = collections.defaultdict(list)
    for group, n, _, got, done in records:
        by_group[group].append((got, done, n))
    assert set(by_group) == set(groups)
    for group, held in by_group.items():
        held.sort()
        assert [n for _, _, n in held] == list(range(per_group)), group
        for (_, done, n), (got, _, m) in zip(held, held[1:]):
            # The next one was handed out only after this one was done.
            assert got >= done, (group, n, m)


def test_sticky_consumers_each_keep_their_groups(driver, project, real):
    """Sticky queue, competing consumers with their own clients, all
    active throughout: every message once, each group in order with one
    in flight, and each group handled by one client only."""
    driver.queue_controller.create('q', metadata=dict(
        GROUPED, _message_group_sticky=600), project=project)
    groups = ['a', 'b', 'c', 'd', 'e', 'f']
    posted = workers.produce_grouped(driver, 'q', project, groups, 8)
    results = workers.run_mixed(
        [('consume_sticky', ('q', project, 'client-%d' % n))
         for n in range(4)], driver, real)
    records = list(itertools.chain(*results))
    check_groups([record[:5] for record in records], posted, groups, 8)
    owners = collections.defaultdict(set)
    for record in records:
        owners[record[0]].add(record[5])
    assert all(len(clients) == 1 for clients in owners.values()), owners


def test_concurrent_advances_promote_exactly_one_head(driver, project,
                                                     real):
    driver.queue_controller.create('q', metadata=GROUPED, project=project)
    ids = workers.produce_grouped(driver, 'q', project, ['x'], 20)
    # Take the group's head away without advancing it (a crash).
    driver.messages.raw.delete_one({'_id': ids[0]})
    heads = workers.run_all('advance_group', 8, driver,
                            ('q', project, '"x"'), real)
    assert set(heads) == {ids[1]}
    stored = list(driver.messages.raw.find(
        fields.queue_filter('q', project)))
    assert [doc['_id'] for doc in stored if 'h' in doc] == [ids[1]]
    assert sorted(doc['s'] for doc in stored) == ['b'] * 18 + ['r']
