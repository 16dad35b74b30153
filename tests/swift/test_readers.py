"""Swift: the read-by-all cut of a queue with many persistent consumers
walks the cursor index (readers.py) with work that does not grow with
them. Here every queue with a consumer counts as "many"
(``read_cut_index_from = 0``), so the contract's tests of who counts run
on the index too."""

import pytest

from localstack.factories import swift as swift_factory
from tests.contract.helpers import bodies, claim, listed, post
# The contract's tests of who counts (required, all, idle), again on the
# index; the others read the cut as these do, or have no consumer.
from tests.contract.test_consumers import (  # noqa: F401 (run here too)
    Reader, positions,
    test_a_consumer_idle_by_one_second_stops_pinning,
    test_read_by_all_needs_required_consumers_to_acknowledge,
    test_required_zero_with_consumers_waits_for_all_of_them)
from tests.contract.test_retention import operator
from tests.swift.requests import Requests
from zaqar_delay.drivers.swift import consumers as swift_consumers
from zaqar_delay.drivers.swift import readers


@pytest.fixture(autouse=True)
def indexed(conf):
    conf.set_override('read_cut_index_from', 0, group=swift_factory.GROUP)


def container(queue, project):
    return swift_consumers.container(queue, project)


def index(driver, queue, project):
    """(cursor, consume_id) of every index entry, in listing order."""
    return [(int(e['name'].split('/')[1]) - 1, e['name'].split('/')[2])
            for e in driver.store.listing_all(container(queue, project),
                                              swift_consumers.INDEX_PREFIX)]


def kept(driver, queue, project):
    """Bodies a plain listing returns (what retention keeps)."""
    return bodies(listed(driver, queue, project, include_claimed=True))


def put_entries(driver, c, entries, ago_ms=0):
    """Index ``entries`` as written ``ago_ms`` ago, with no version."""
    for name in entries:
        driver.store.put(c, name, content_type=swift_consumers.entry_type(
            driver.now_ms() - ago_ms))


def read_to(reader, at, body):
    """``reader`` is handed messages up to ``body`` and acknowledges
    them."""
    handed = sorted(at.values()).index(at[body]) + 1
    reader.page(limit=handed)
    reader.page(str(at[body]), limit=handed)


def readers_and_posts(driver, make_queue, project, count):
    queue = make_queue()
    team = [Reader(driver, queue, project) for _ in range(count)]
    # Kept past the days the tests' clock moves on.
    post(driver, queue, project, 'a', 'b', 'c', ttl=7 * 86400)
    return queue, team, positions(driver, queue, project)


@operator(consumers_required=1)
def test_each_version_has_its_entry_and_the_replaced_one_goes(
        driver, make_queue, project):
    queue, (reader,), at = readers_and_posts(driver, make_queue, project, 1)
    assert index(driver, queue, project) == [(-1, str(reader.id))]
    read_to(reader, at, 'a')
    assert index(driver, queue, project) == [(at['a'], str(reader.id))]
    assert kept(driver, queue, project) == ['b', 'c']


@operator(consumers_required=1)
def test_a_forgotten_consumer_leaves_no_entry(driver, make_queue, project):
    queue, (reader,), _ = readers_and_posts(driver, make_queue, project, 1)
    reader.remove()
    assert index(driver, queue, project) == []


@operator(consumers_required=1)
@pytest.mark.parametrize('many', [4, 12])
def test_the_read_cut_sends_the_same_requests_however_many_consumers(
        driver, make_queue, project, monkeypatch, many):
    # The lowest reader is found first; the others are never read.
    queue, team, at = readers_and_posts(driver, make_queue, project, many)
    read_to(team[0], at, 'a')       # the lowest
    for reader in team[1:]:
        read_to(reader, at, 'b')
    requests = Requests(driver, monkeypatch)
    sent = requests.during(
        lambda: driver.message_controller.retention_of(queue, project))
    by_kind = sorted(requests.calls)
    assert kept(driver, queue, project) == ['b', 'c']
    # Two capped listings of versions and subscriptions, the marker and
    # the first index page, then one check (two listings).
    assert (sent, by_kind) == (6, ['get_container'] * 5 + ['head_object'])


@operator(consumers_required=2)
def test_an_idle_consumer_s_entry_goes_and_comes_back_with_it(
        driver, make_queue, project, clock):
    queue, (idle, busy), at = readers_and_posts(driver, make_queue, project,
                                                2)
    clock.advance(86400 + 1)          # both idle (consumer_idle_time)
    read_to(busy, at, 'c')
    # One live consumer of the two required: nothing is read by all, and
    # the idle one's entry went.
    assert kept(driver, queue, project) == ['a', 'b', 'c']
    assert index(driver, queue, project) == [(at['c'], str(busy.id))]
    read_to(idle, at, 'a')
    assert kept(driver, queue, project) == ['b', 'c']
    assert index(driver, queue, project) == [(at['a'], str(idle.id)),
                                             (at['c'], str(busy.id))]


@operator(consumers_required=1)
def test_an_entry_written_before_its_version_is_passed_over(
        driver, make_queue, project):
    # Writes in flight: their entries are there, their versions not yet
    # (a consumer registering, one moving on); neither counts, neither is
    # deleted, and a consumer moving on counts by the entry of the version
    # it still has.
    queue, (reader,), at = readers_and_posts(driver, make_queue, project, 1)
    read_to(reader, at, 'a')
    c = container(queue, project)
    in_flight = [swift_consumers.entry_obj(None, 'registering', 1),
                 swift_consumers.entry_obj(at['a'], str(reader.id), 99)]
    put_entries(driver, c, in_flight)
    assert kept(driver, queue, project) == ['b', 'c']
    assert [driver.store.head(c, name) is not None
            for name in in_flight] == [True, True]


@operator(consumers_required=1)
def test_entries_a_failed_write_left_are_deleted_and_cut_nothing(
        driver, make_queue, project):
    queue, (reader,), at = readers_and_posts(driver, make_queue, project, 1)
    read_to(reader, at, 'b')
    c = container(queue, project)
    # Of a version replaced since, and of one that never came (its write
    # died), older than any write in flight: both below the live entry.
    put_entries(driver, c, [
        swift_consumers.entry_obj(None, str(reader.id), 1),
        swift_consumers.entry_obj(at['a'], str(reader.id), 99)],
        ago_ms=readers.PENDING_MS + 1)
    assert kept(driver, queue, project) == ['c']
    assert index(driver, queue, project) == [(at['b'], str(reader.id))]


@operator(consumers_required=1)
def test_consumers_of_an_earlier_release_hold_the_cut_until_idle(
        driver, make_queue, project, clock):
    # An earlier release wrote no entries and no marker: the walk cannot
    # know who is missing, so nothing is read by all until every consumer
    # not seen since is idle.
    queue, (old, new), at = readers_and_posts(driver, make_queue, project,
                                              2)
    read_to(new, at, 'c')
    c = container(queue, project)
    driver.store.delete_many(c, [swift_consumers.BUILT_OBJ] + [
        e['name'] for e in driver.store.listing_all(
            c, swift_consumers.INDEX_PREFIX)])
    assert kept(driver, queue, project) == ['a', 'b', 'c']
    assert driver.store.head(c, swift_consumers.BUILT_OBJ) is not None
    clock.advance(3600)
    read_to(old, at, 'a')
    assert kept(driver, queue, project) == ['a', 'b', 'c']
    # A day after the first walk met no marker, a consumer not seen since
    # is idle: the index is complete, and the old consumer, which has
    # its entry now, is the lowest.
    clock.advance(86400 - 3600 + 1)
    new.page(str(at['c']), limit=3)
    old.page(str(at['a']), limit=1)
    assert kept(driver, queue, project) == ['b', 'c']


@operator(consumers_required=1)
def test_a_walk_past_its_bound_cuts_nothing(driver, make_queue, project):
    # Entries below the lowest live one that are all being written (as
    # many consumers' writes in flight at once): each takes a check, and
    # past WALK_CHECKS the walk answers "unknown" instead of going on.
    queue, (reader,), at = readers_and_posts(driver, make_queue, project, 1)
    read_to(reader, at, 'b')
    put_entries(driver, container(queue, project), [
        swift_consumers.entry_obj(None, 'in-flight-%02d' % n, 1)
        for n in range(readers.WALK_CHECKS + 1)])
    assert kept(driver, queue, project) == ['a', 'b', 'c']
    assert bodies(claim(driver, queue, project, limit=3)[1]) == [
        'a', 'b', 'c']


@operator(consumers_required=1)
def test_a_write_that_lost_its_race_takes_its_entry_back(
        driver, make_queue, project, monkeypatch):
    queue, (reader,), at = readers_and_posts(driver, make_queue, project, 1)
    reader.page(limit=3)
    store, messages = driver.store, driver.message_controller
    real_create = store.create

    def rival_first(container_, name, *args, **kwargs):
        # A rival acknowledging b writes the version this write (of a)
        # was about to: this one's entry is put, its version refused.
        monkeypatch.setattr(store, 'create', real_create)
        messages._consumer_update(queue, project, str(reader.id), at['b'],
                                  None, 0)
        return real_create(container_, name, *args, **kwargs)

    monkeypatch.setattr(store, 'create', rival_first)
    messages._consumer_update(queue, project, str(reader.id), at['a'], None,
                              0)
    assert index(driver, queue, project) == [(at['b'], str(reader.id))]
    assert kept(driver, queue, project) == ['c']
