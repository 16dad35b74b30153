"""Swift: subscription, consumer and pin calls cut short midway (a 503, or
a client that timed out and sent the call again) have, once retried, the
effect of one call."""

import uuid

import pytest

from tests.contract.helpers import post
from tests.contract.test_sticky import ALICE, BOB, STICKY
from tests.contract.test_sticky import claim_as, msg, names
from zaqar_delay import consumers
from zaqar_delay import errors
from zaqar_delay.drivers.swift import consumers as swift_consumers
from zaqar_delay.drivers.swift import pins


def fail_once(monkeypatch, owner, attr, when=lambda *a, **k: True):
    """``owner.attr`` answers 503 without running, the first time ``when``
    holds; then behaves."""
    real = getattr(owner, attr)
    fired = []

    def wrapper(*args, **kwargs):
        if not fired and when(*args, **kwargs):
            fired.append(args)
            raise errors.BackendUnavailable(backend='Swift',
                                            reason='503 midway')
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, attr, wrapper)
    return fired


def a_consumer_that_read_a_page(driver, queue, project, acknowledged=False):
    """A persistent consumer subscribed to ``queue``, which read a page of
    two messages (and, ``acknowledged``, the next, which acknowledges
    it): (its id, its subscription's id, the first page's marker)."""
    consume_id = uuid.uuid4()
    sid = driver.subscription_controller.create(
        queue, consumers.PREFIX + str(consume_id), 3600, {},
        project=project)
    post(driver, queue, project, 'a', 'b')
    pages = driver.message_controller.list(queue, project=project,
                                           client_uuid=consume_id)
    assert len(list(next(pages))) == 2
    marker = next(pages)
    if acknowledged:
        list(next(driver.message_controller.list(
            queue, project=project, client_uuid=consume_id, marker=marker)))
        assert state_of(driver, queue, project, consume_id)[0] is not None
    return consume_id, sid, marker


def state_of(driver, queue, project, consume_id):
    found = driver.message_controller._consumer(queue, project,
                                                str(consume_id))[1]
    return found.cursor, found.handed, found.lost


def test_a_subscriber_change_retried_after_a_503_midway_is_made(
        driver, make_queue, project, monkeypatch):
    """The update reserved the new subscriber for this subscription, then
    storing the subscription failed; every retry met that reservation
    and answered 409 (subscriber taken)."""
    queue = make_queue()
    subs = driver.subscription_controller
    sid = subs.create(queue, 'http://127.0.0.1:9/a', 3600, {},
                      project=project)
    fail_once(monkeypatch, subs, '_write')
    with pytest.raises(errors.BackendUnavailable):
        subs.update(queue, sid, project=project,
                    subscriber='http://127.0.0.1:9/b')
    monkeypatch.undo()
    subs.update(queue, sid, project=project,
                subscriber='http://127.0.0.1:9/b')
    assert subs.get(queue, sid, project=project)['subscriber'] == (
        'http://127.0.0.1:9/b')


def test_a_create_retried_while_the_first_still_runs_makes_one(
        driver, make_queue, project, monkeypatch):
    """The client's create timed out while the server was between
    reserving the subscriber and storing the subscription; the retry
    took the reservation for a dead one, freed it and made a second
    subscription for the same subscriber (each post notified twice).
    The retry now answers 503 (try again), not "taken": Zaqar reads
    the taken subscription back, and there is none yet."""
    queue = make_queue()
    subs = driver.subscription_controller
    real_write, retried = subs._write, []

    def slow_write(container, subscription, expires=None):
        if not retried:
            with pytest.raises(errors.BackendUnavailable):
                subs.create(queue, 'http://127.0.0.1:9/a', 3600, {},
                            project=project)
            retried.append(True)
        return real_write(container, subscription, expires)

    monkeypatch.setattr(subs, '_write', slow_write)
    first = subs.create(queue, 'http://127.0.0.1:9/a', 3600, {},
                        project=project)
    monkeypatch.undo()
    assert retried
    assert [s['id'] for s in next(subs.list(queue, project=project))] == [
        first]


def test_a_create_retried_after_its_store_failed_is_made(
        driver, make_queue, project, monkeypatch):
    """The create reserved the subscriber, then storing the subscription
    failed (503); the client's retry must not be held up by that
    reservation."""
    queue = make_queue()
    subs = driver.subscription_controller
    fail_once(monkeypatch, subs, '_write')
    with pytest.raises(errors.BackendUnavailable):
        subs.create(queue, 'http://127.0.0.1:9/a', 3600, {},
                    project=project)
    monkeypatch.undo()
    again = subs.create(queue, 'http://127.0.0.1:9/a', 3600, {},
                        project=project)
    assert again is not None
    assert subs.get_with_subscriber(queue, 'http://127.0.0.1:9/a',
                                    project)['id'] == again


@pytest.mark.parametrize('leaving', ['unsubscribe', 'move'])
def test_a_consumer_left_by_a_call_retried_after_a_503_is_forgotten(
        driver, make_queue, project, monkeypatch, leaving):
    """The subscription was deleted (or moved to another subscriber),
    then forgetting the consumer failed; the retry found no subscription
    of that consumer any more and forgot nothing, so the consumer
    subscribed again resumed its old cursor."""
    queue = make_queue()
    subs = driver.subscription_controller
    consume_id, sid, _ = a_consumer_that_read_a_page(
        driver, queue, project, acknowledged=True)
    moved_to = consumers.PREFIX + str(uuid.uuid4())

    def leave():
        if leaving == 'unsubscribe':
            subs.delete(queue, sid, project=project)
        else:
            subs.update(queue, sid, project=project, subscriber=moved_to)

    fail_once(monkeypatch, driver.message_controller._consumers_store,
              'forget')
    with pytest.raises(errors.BackendUnavailable):
        leave()
    monkeypatch.undo()
    leave()
    subs.create(queue, consumers.PREFIX + str(consume_id), 3600, {},
                project=project)
    assert state_of(driver, queue, project, consume_id) == (None, None, 0)


def test_a_consumer_update_cut_short_leaves_no_old_state_behind(
        driver, make_queue, project, monkeypatch):
    """A page's update wrote the consumer's next version, then deleting
    the one it replaced failed; the retried page had nothing to change
    and the old version stayed. When the tombstone of a later
    unsubscribe expired, that old state was the newest again, and the
    consumer subscribed again resumed from it."""
    queue = make_queue()
    subs = driver.subscription_controller
    consume_id, sid, marker = a_consumer_that_read_a_page(driver, queue,
                                                          project)
    failed = fail_once(monkeypatch, driver.store, 'delete_many',
                       when=lambda c, doomed: any(
                           name.startswith('v/') for name in doomed))

    def next_page():
        pages = driver.message_controller.list(
            queue, project=project, client_uuid=consume_id, marker=marker)
        return list(next(pages))

    with pytest.raises(errors.BackendUnavailable):
        next_page()
    assert failed
    monkeypatch.undo()
    next_page()                         # the client's retry
    subs.delete(queue, sid, project=project)
    container = swift_consumers.container(queue, project)
    versions = driver.store.listing_all(container, 'v/')
    assert len(versions) == 1 and 'gone=1' in versions[0]['content_type']
    # Swift's expirer removes the tombstone an hour later.
    driver.store.delete(container, versions[0]['name'])
    subs.create(queue, consumers.PREFIX + str(consume_id), 3600, {},
                project=project)
    assert state_of(driver, queue, project, consume_id) == (None, None, 0)


def test_an_unpin_retried_after_a_503_midway_frees_the_group(
        driver, make_queue, project, monkeypatch):
    """The pin went, then filing the head free failed; the retry found
    no pin and filed nothing: the head stayed filed for the client it
    was pinned to while that client stayed active."""
    queue = make_queue(STICKY)
    post(driver, queue, project, msg('a', 1), msg('a', 2), ttl=3600)
    claim_id, got = claim_as(ALICE, driver, queue, project)
    assert names(got) == ['a1']
    driver.claim_controller.delete(queue, claim_id, project=project)
    fail_once(monkeypatch, pins, 'refile_head')
    with pytest.raises(errors.BackendUnavailable):
        driver.message_controller.unpin_group(queue, 'a', project=project)
    monkeypatch.undo()
    driver.message_controller.unpin_group(queue, 'a', project=project)
    assert names(claim_as(BOB, driver, queue, project)[1]) == ['a1']
