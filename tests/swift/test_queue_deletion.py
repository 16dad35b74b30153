"""Deleting a queue on Swift: its objects are listed and deleted a page at
a time, a container that cannot be emptied is reported, and gc's
housekeeping running meanwhile does not create the queue's container
again."""

import logging

import pytest

from tests.contract.helpers import claim, listed, post
from zaqar_delay import stages
from zaqar_delay.drivers.swift import messages as swift_messages
from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import retention as swift_retention


def test_a_queue_deletion_holds_one_listing_page_at_a_time(
        driver, make_queue, project, monkeypatch):
    """The deletion listed every object of the queue into memory before
    deleting any (a queue of a million messages: several million
    entries held by one API worker)."""
    stage = stages.QueueStage(driver, driver.control_driver)
    queue = make_queue()
    post(driver, queue, project, *range(12))
    claim(driver, queue, project, limit=4)
    container = driver.queue_state(queue, project).c
    monkeypatch.setattr(swift_messages, 'PURGE_PAGE', 7)
    listing, pages = driver.store.listing, []

    def counted(c, prefix, *args, **kwargs):
        page = listing(c, prefix, *args, **kwargs)
        if c == container and prefix == '':
            pages.append(len(page))
        return page

    monkeypatch.setattr(driver.store, 'listing', counted)
    stage.delete(queue, project)
    assert len(pages) > 3 and max(pages) <= 7, pages
    driver.queue_controller.create(queue, project=project)
    assert listed(driver, queue, project, include_claimed=True) == []
    assert claim(driver, queue, project) == (None, [])


def test_a_container_left_not_empty_is_reported(driver, make_queue, project,
                                                monkeypatch, caplog):
    """Posts racing the deletion (or Swift's container updates lagging)
    kept the container from being deleted five times over: the deletion
    gave up without a word."""
    stage = stages.QueueStage(driver, driver.control_driver)
    queue = make_queue()
    post(driver, queue, project, 'a')
    monkeypatch.setattr(driver.store, 'delete_container', lambda c: False)
    with caplog.at_level(logging.WARNING):
        stage.delete(queue, project)
    assert 'not yet empty' in caplog.text and queue in caplog.text


def test_a_fold_in_flight_counts_nothing_into_the_queue_created_again(
        driver, clock, make_queue, project, monkeypatch):
    """gc's fold listed the queue's removal tallies; the queue was then
    deleted and created again, and the fold's total (5) created the
    deleted container again: the new queue's stats reported the old
    one's removals."""
    kept = {'_retention': {'length': 1}}
    queue = make_queue(kept)
    post(driver, queue, project, *range(6), ttl=3600)
    assert driver.clean_queue(queue, project) == 5
    clock.advance(swift_retention.FOLD_AGE_S + 1)
    qs = driver.queue_state(queue, project)
    create, deleted = driver.store.create, []

    def deleted_before_the_total(container, name, *args, **kwargs):
        if name.startswith('t/') and not deleted:
            deleted.append(name)
            stages.QueueStage(driver, driver.control_driver).delete(
                queue, project)
            make_queue(kept, name=queue)
        return create(container, name, *args, **kwargs)

    monkeypatch.setattr(driver.store, 'create', deleted_before_the_total)
    assert swift_retention.fold(qs, clock(), at_least=1) == 0
    monkeypatch.undo()
    assert deleted
    stats = driver.message_controller.stats(queue, project)
    assert stats['retention']['removed'] == 0


@pytest.mark.parametrize('operator_config', [
    '[retention]\nconsumers_required = 0\n'], ids=['required=0'])
def test_reading_a_deleted_queue_does_not_create_it_again(
        driver, make_queue, project):
    """The read-by-all floor was stored with a plain PUT, which creates
    the container: a listing of a queue that was deleted (Zaqar's v2 API
    lists a missing queue as empty) made it again, with the queue's
    names, so gc and the exporter saw a queue that does not exist (and a
    read of any queue name did it)."""
    queue = make_queue()
    post(driver, queue, project, 'a')
    stages.QueueStage(driver, driver.control_driver).delete(queue, project)
    container = names.container(names.MESSAGES, queue, project)
    assert driver.store.container_meta(container) is None
    listed(driver, queue, project)
    assert driver.store.container_meta(container) is None
    assert (project, queue) not in set(driver.queues())


def _deleting_at_first(driver, monkeypatch, queue, project, prefix):
    """Delete the queue just before the first write of an object named
    ``prefix...`` reaches Swift (a deletion landing while that operation
    is in flight); the names written after it are collected."""
    put, written = driver.store.put, []

    def put_after_deletion(container, name, *args, **kwargs):
        if name.startswith(prefix) and not written:
            stages.QueueStage(driver, driver.control_driver).delete(
                queue, project)
        if written or name.startswith(prefix):
            written.append(name)
        return put(container, name, *args, **kwargs)

    monkeypatch.setattr(driver.store, 'put', put_after_deletion)
    return written


def _gone(driver, queue, project):
    container = names.container(names.MESSAGES, queue, project)
    return (driver.store.container_meta(container) is None
            and (project, queue) not in set(driver.queues()))


def test_a_claim_in_flight_does_not_make_its_deleted_queue_again(
        driver, make_queue, project, monkeypatch):
    """A claim's record, expiry hint and locks were written with plain
    PUTs, which create a missing container: a queue deleted while a
    claim was between its listing and its locks came back as a container
    holding a claim and locks, a queue to gc and the exporter that no
    API call could see or delete."""
    queue = make_queue()
    post(driver, queue, project, 'a', 'b')
    written = _deleting_at_first(driver, monkeypatch, queue, project, 'c/')
    assert claim(driver, queue, project) == (None, [])
    monkeypatch.undo()
    assert any(name.startswith('l/') for name in written), written
    assert _gone(driver, queue, project)


def test_a_release_in_flight_does_not_make_its_deleted_queue_again(
        driver, make_queue, project, monkeypatch):
    """Releasing a claim files its messages again (``a/``): the filing
    landed after the queue's deletion and made its container again."""
    queue = make_queue()
    post(driver, queue, project, 'a', 'b')
    claim_id, _ = claim(driver, queue, project)
    written = _deleting_at_first(driver, monkeypatch, queue, project, 'a/')
    driver.claim_controller.delete(queue, claim_id, project=project)
    monkeypatch.undo()
    assert written
    assert _gone(driver, queue, project)


def test_a_container_a_proxy_still_takes_for_missing_is_written(
        driver, make_queue, project, monkeypatch):
    """A write that never creates a container (everything but a post's
    positions and a sticky client's activity) asks the container server
    whether a 404 means the container is gone: a proxy's cache can still
    hold a container made moments ago as missing, and the claim must not
    come back empty for it."""
    queue = make_queue()
    post(driver, queue, project, 'a')
    call, missed = driver.store.call, []

    def stale_once(method, container, name=None, *args, **kwargs):
        if method == 'put_object' and name.startswith('l/') and not missed:
            missed.append(name)
            return 404
        return call(method, container, name, *args, **kwargs) \
            if name is not None else call(method, container, *args,
                                          **kwargs)

    monkeypatch.setattr(driver.store, 'call', stale_once)
    claim_id, messages = claim(driver, queue, project)
    monkeypatch.undo()
    assert missed and [m['body'] for m in messages] == ['a']
