"""Competing consumers on a grouped queue: per-group order, and at most
one message of a group in flight at any instant. Threads on mongomock,
spawned processes on a real server (ZAQAR_DELAY_TEST_MONGODB_URI)."""

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


def test_competing_consumers_keep_each_group_in_order(driver, project,
                                                     real):
    driver.queue_controller.create('q', metadata=GROUPED, project=project)
    groups = ['a', 'b', 'c', 7, 'e']
    posted = workers.produce_grouped(driver, 'q', project, groups, 12)
    results = workers.run_all('consume_grouped', 6, driver, ('q', project),
                              real)
    check_groups(list(itertools.chain(*results)), posted, groups, 12)
    assert driver.messages.raw.count_documents(
        fields.queue_filter('q', project)) == 0


def test_consumers_racing_posters_keep_each_group_in_order(driver, project,
                                                          real):
    """Posters and consumers at once: each group is posted by one poster,
    so its posting order is defined."""
    driver.queue_controller.create('q', metadata=GROUPED, project=project)
    posters = [(['p%d-%d' % (i, g) for g in range(3)], 10)
               for i in range(3)]
    # Each poster posts its own groups; consumers start together.
    results = workers.run_mixed(
        [('produce_grouped', ('q', project) + poster) for poster in posters]
        + [('consume_grouped', ('q', project, 40))] * 5, driver, real)
    posted = list(itertools.chain(*results[:3]))
    records = list(itertools.chain(*results[3:]))
    check_groups(records, posted,
                 list(itertools.chain(*[p[0] for p in posters])), 10)


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


def test_moving_a_group_under_competing_consumers(driver, project, real):
    """A group moved while consumers work both queues: every message is
    handed out once, in order, never two of the group at once."""
    for name in ('q', 't'):
        driver.queue_controller.create(name, metadata=GROUPED,
                                       project=project)
    posted = workers.produce_grouped(driver, 'q', project, ['a', 'b'], 15)
    results = workers.run_mixed(
        [('move_when_free', ('q', project, 'a', 't'))]
        + [('consume_grouped', ('q', project, 40))] * 3
        + [('consume_grouped', ('t', project, 400))] * 2, driver, real)
    moved, records = results[0], list(itertools.chain(*results[1:]))
    assert moved is not None
    check_groups(records, posted, ['a', 'b'], 15)
    in_target = {r[2] for r in itertools.chain(*results[4:])}
    assert len(in_target) == moved
    assert {r[0] for r in itertools.chain(*results[4:])} <= {'a'}
