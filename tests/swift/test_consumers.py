"""Persistent consumers on Swift: the version chain, expiry with the
subscription, the read-by-all floor, lost from removed-position markers
and bounded cleanup.

The behaviour every backend shares is in tests/contract/test_consumers.py;
these tests look at the Swift objects.
"""

import time
import uuid

from tests.consumer_helpers import (A, B, behind_a_delayed_run,
                                    consumer, make_queue, page,
                                    subscribe)
from tests.contract.helpers import bodies, listed, post
from localstack.factories import swift as swift_factory
from zaqar_delay import consumers
from zaqar_delay.drivers.swift import consumers as swift_consumers
from zaqar_delay.drivers.swift import names


def versions(driver, project, consume_id):
    return [e['name'] for e in driver.store.listing_all(
        swift_consumers.container('q', project), 'v/' + consume_id + '/')]


def message_objects(driver, project, prefix):
    qs = driver.queue_state('q', project)
    return [e['name'] for e in driver.store.listing_all(qs.c, prefix)]


def test_state_is_one_version_carried_in_the_listing(driver, project):
    make_queue(driver, project)
    subscribe(driver, project, A)
    assert versions(driver, project, A) == [
        'v/{}/{}'.format(A, names.pos(1))]
    update = driver.message_controller._consumer_update
    update('q', project, A, None, 7, 0)
    update('q', project, A, 5, None, 2)
    # The winner of each version deletes the one it replaced.
    assert versions(driver, project, A) == [
        'v/{}/{}'.format(A, names.pos(3))]
    entry = driver.store.listing(swift_consumers.container('q', project),
                                 'v/')[0]
    params = names.ct_params(entry['content_type'])
    assert (params['cur'], params['h'], params['lost']) == ('5', '7', '2')


def test_update_moves_forward_only(driver, project):
    make_queue(driver, project)
    subscribe(driver, project, A)
    update = driver.message_controller._consumer_update
    update('q', project, A, None, 10, 0)
    update('q', project, A, 8, None, 1)
    update('q', project, A, 3, 4, 1)
    found = consumer(driver, project, A)
    # The page handed at 4, behind the one handed at 10, is one handed
    # again: its gap was counted then (as on Redis).
    assert (found.cursor, found.handed, found.lost) == (8, 10, 1)


def test_a_forgotten_consumer_stays_forgotten(driver, project):
    make_queue(driver, project)
    subscribe(driver, project, A)
    driver.message_controller._consumer_forget('q', project, A)
    driver.message_controller._consumer_update('q', project, A, 1, 1, 0)
    assert consumer(driver, project, A) is None
    # The newest version is a tombstone; registering again starts afresh.
    newest = driver.store.listing(swift_consumers.container('q', project),
                                  'v/' + A + '/', limit=1, reverse=True)[0]
    assert names.ct_params(newest['content_type']).get('gone') == '1'
    driver.message_controller._consumer_register('q', project, A)
    found = consumer(driver, project, A)
    assert (found.cursor, found.handed, found.lost) == (None, None, 0)


def test_an_expired_subscription_is_no_consumer(driver, project):
    make_queue(driver, project)
    subscribe(driver, project, A, ttl=60)
    subscribe(driver, project, B)
    c = swift_consumers.container('q', project)
    name = names.subscriber_obj(consumers.PREFIX + A)
    # The subscriber entry carries the expiry the listing reads; make it
    # past, as the wall clock would in a minute.
    driver.store.put(c, name, b'x', content_type=names.content_type(
        e=int(time.time()) - 1))
    assert [x.consume_id for x in
            driver.message_controller._consumers('q', project)[1]] == [B]


def test_removed_positions_are_marked_only_for_queues_with_consumers(
        driver, project):
    make_queue(driver, project)
    ids = post(driver, 'q', project, 'a', 'b')
    driver.message_controller.delete('q', ids[0], project=project)
    assert message_objects(driver, project, 'w/') == []
    subscribe(driver, project, A)
    _, marker = page(driver, project, A, limit=1)      # b handed
    ids = post(driver, 'q', project, 'c', 'd')
    driver.message_controller.delete('q', ids[0], project=project)
    assert len(message_objects(driver, project, 'w/')) == 1
    # c went after the last position handed to A: lost, once.
    got, marker = page(driver, project, A, marker=marker)
    assert bodies(got) == ['d']
    assert consumer(driver, project, A).lost == 1
    page(driver, project, A)
    assert consumer(driver, project, A).lost == 1


def test_read_by_all_is_for_good_through_the_stored_floor(driver, project):
    make_queue(driver, project, consumers_required=1)
    subscribe(driver, project, A)
    post(driver, 'q', project, 'a', 'b')
    got, marker = page(driver, project, A)
    page(driver, project, A, marker=marker)
    assert listed(driver, 'q', project) == []
    assert message_objects(driver, project, 'k/') == [
        names.cut_obj(int(marker) + 1)]
    # The consumer leaves: nothing is read by all now, the floor stays.
    driver.subscription_controller.delete('q', _sid(driver, project, A),
                                          project=project)
    assert listed(driver, 'q', project) == []
    post(driver, 'q', project, 'c')
    assert bodies(listed(driver, 'q', project)) == ['c']


def _sid(driver, project, consume_id):
    return driver.subscription_controller.get_with_subscriber(
        'q', consumers.PREFIX + consume_id, project=project)['id']


def test_cleanup_of_read_messages_is_bounded_by_the_batch(driver, project):
    make_queue(driver, project, consumers_required=1)
    subscribe(driver, project, A)
    post(driver, 'q', project, *range(30))
    got, marker = page(driver, project, A, limit=20)
    page(driver, project, A, marker=marker, limit=1)
    mc = driver.message_controller
    assert mc.clean('q', project, 5) == (5, True)
    removed = 5
    while True:
        count, more = mc.clean('q', project, 5)
        removed += count
        if not more:
            break
    assert removed == 20
    assert mc.stats('q', project)['retention']['removed'] == 20
    assert len(message_objects(driver, project, 'p/')) == 10


def test_lag_counts_kept_messages_after_the_cursor(driver, project):
    make_queue(driver, project)
    sid = subscribe(driver, project, A)
    post(driver, 'q', project, *range(5))
    got, marker = page(driver, project, A, limit=2)
    page(driver, project, A, marker=marker, limit=1)
    options = driver.subscription_controller.get('q', sid,
                                                 project=project)['options']
    assert (options['cursor'], options['lag']) == (marker, 3)
    # List (the REST API's, with consumers) does not merge the report.
    listed_subs = list(next(driver.subscription_controller.list(
        'q', project=project, with_consumers=True)))
    assert 'lag' not in listed_subs[0]['options']


def test_the_cursor_survives_a_swift_proxy_restart(driver, project,
                                                   swift_server, request,
                                                   conf):
    """README, Persistent consumers: a consumer resumes where it left off
    after the store restarts, here Swift's proxy server: SIGKILLed and
    started again (from this, the main, thread: see
    SwiftServer.restart_proxy), its storage servers kept. A fresh driver
    reads on, as a restarted zaqar-server would. The shared server serves
    again before restart_proxy returns, so the tests this xdist worker
    runs after this one see no difference."""
    make_queue(driver, project)
    sid = subscribe(driver, project, A)
    post(driver, 'q', project, *range(8))
    got, acked = page(driver, project, A, limit=3)
    assert bodies(got) == [0, 1, 2]
    # Acknowledges 0..2; 3..5 are handed out but never acknowledged.
    got, handed = page(driver, project, A, marker=acked, limit=3)
    assert bodies(got) == [3, 4, 5]
    swift_server.restart_proxy()
    fresh = swift_factory.make_driver(request, conf)
    try:
        # The state stored before the restart, read by the fresh driver:
        # a lost consumer reads None, a reset one (None, None, 0).
        found = consumer(fresh, project, A)
        assert (found.cursor, found.handed, found.lost) == (
            int(acked), int(handed), 0)
        # Resumes right after the stored cursor, in order: a lost cursor
        # (a plain listing) or a reset one would start again at 0, and
        # one taken from the last position handed out would skip 3..5,
        # the page read but not acknowledged before the restart.
        got, marker = page(fresh, project, A)
        assert bodies(got) == [3, 4, 5, 6, 7]
        # Acknowledging the rest after the restart leaves nothing, and
        # nothing was counted lost on the way.
        assert page(fresh, project, A, marker=marker) == ([], marker)
        options = fresh.subscription_controller.get(
            'q', sid, project=project)['options']
        assert (options['cursor'], options['lag'], options['lost']) == (
            marker, 0, 0)
    finally:
        fresh.close()


def test_finding_one_consumer_reads_none_of_the_others(driver, project,
                                                       monkeypatch):
    """Every listing with a Client-ID asks whether that client is a
    persistent consumer: with 20 other consumers on the queue, the
    lookup reads at most its own version and its own subscription entry
    (before: every consumer's, two full listings per listing call)."""
    make_queue(driver, project)
    others = [str(uuid.uuid4()) for _ in range(20)]
    for consume_id in others + [A]:
        subscribe(driver, project, consume_id)
    post(driver, 'q', project, 'm')
    subscriptions = swift_consumers.container('q', project)
    read = []
    real_listing = driver.store.listing

    def listing(container, prefix, *args, **kwargs):
        found = real_listing(container, prefix, *args, **kwargs)
        if container == subscriptions:
            read.extend(entry['name'] for entry in found)
        return found

    monkeypatch.setattr(driver.store, 'listing', listing)
    assert bodies(page(driver, project, A)[0]) == ['m']
    # The lookup's two entries, then the page's update reading A's newest
    # version.
    assert all(A in name for name in read), read
    assert len(read) == 3, read
    read.clear()
    stranger = str(uuid.uuid4())
    assert consumer(driver, project, stranger) is None
    assert read == [], read
    assert [found.consume_id for found in driver.message_controller
            .list_consumers('q', project)[1]] == sorted(others + [A])


def test_a_message_gc_expired_counts_as_lost_for_a_consumer(
        driver, clock, project):
    """gc's removals mark each position for the queue's persistent
    consumers (w/) only when it knows the queue's names; it built its
    state without them, so a message gc expired behind a consumer's
    cursor was never counted in its ``lost``."""
    make_queue(driver, project)
    subscribe(driver, project, A)
    post(driver, 'q', project, 'a', ttl=3600)
    post(driver, 'q', project, 'b', ttl=60)
    post(driver, 'q', project, 'c', ttl=3600)
    got, marker = page(driver, project, A, limit=1)
    assert bodies(got) == ['a']
    clock.advance(61)
    driver.gc()
    # gc removed b (its position too): only its w/ marker tells.
    container = names.container(names.MESSAGES, 'q', project)
    assert len(driver.store.listing_all(container, 'p/')) == 2
    got, marker = page(driver, project, A, marker=marker)
    assert bodies(got) == ['c']
    assert consumer(driver, project, A).lost == 1


def test_a_poll_behind_a_delayed_head_lists_about_a_page(driver, project,
                                                         clock, monkeypatch):
    """A consumer polling behind a delayed head gets an empty page (it
    stops before a message that is not due) from one listing of
    positions, not from listings that walk the delayed run behind the
    head: the poll repeats until the head is due."""
    behind_a_delayed_run(driver, project, 100, 10)
    listed_prefixes = []
    listing = driver.store.listing

    def counted(container, prefix, *args, **kwargs):
        listed_prefixes.append(prefix)
        return listing(container, prefix, *args, **kwargs)

    monkeypatch.setattr(driver.store, 'listing', counted)
    assert page(driver, project, A) == ([], None)
    assert listed_prefixes.count('p/') == 1, listed_prefixes
    clock.advance(61)
    got, _ = page(driver, project, A, limit=5)
    assert bodies(got) == [0, 1, 2, 3, 4]
