"""Swift: a delete sends no DELETE for an object that is not there (a
Swift DELETE of an absent object still writes a tombstone and a container
update). Counted from the bulk middleware's own reply, never timed."""

import pytest

from tests.contract.helpers import claim, post

GROUPED = {'_message_group_key': 'g'}


@pytest.fixture
def not_found(driver, monkeypatch):
    """Objects each bulk delete of the driver named but Swift did not
    have, in order."""
    counts = []
    real = driver.store._check_bulk

    def check(reply):
        result = real(reply)
        counts.append(result['Number Not Found'])
        return result

    monkeypatch.setattr(driver.store, '_check_bulk', check)
    return counts


def left_in(driver, queue, project):
    qs = driver.queue_state(queue, project)
    return sorted(entry['name'][:2] for entry in
                  driver.store.listing_all(qs.c, '')
                  if entry['name'][:2] in ('a/', 'A/', 'd/', 'p/', 'm/',
                                           'l/', 'g/'))


@pytest.mark.parametrize('metadata', [{}, GROUPED],
                         ids=['plain', 'grouped'])
def test_deleting_claimed_messages_names_only_objects_that_exist(
        driver, make_queue, project, not_found, metadata):
    # Claimed messages: the claim removed their filings, so their deletes
    # (one by id, then a bulk delete) name only the message, its position,
    # lock and group entry: Swift finds every one of them.
    queue = make_queue(metadata)
    body = (lambda n: {'g': 'g%d' % n, 'n': n}) if metadata else str
    post(driver, queue, project, *map(body, range(3)))
    claim_id, got = claim(driver, queue, project)
    assert len(got) == 3
    del not_found[:]
    controller = driver.message_controller
    controller.delete(queue, got[0]['id'], project=project, claim=claim_id)
    controller.bulk_delete(queue, [m['id'] for m in got[1:]],
                           project=project, claim_ids=[claim_id])
    assert not_found and set(not_found) == {0}, not_found
    assert left_in(driver, queue, project) == []


def test_deleting_an_unclaimed_message_removes_its_filing(
        driver, make_queue, project):
    # Not held by a claim: its filing is still there and goes with it, so
    # no claim meets an entry that names a missing message.
    queue = make_queue()
    posted = post(driver, queue, project, 'free', 'claimed')
    claim_id, got = claim(driver, queue, project, limit=1)
    driver.message_controller.delete(queue, posted[1], project=project)
    driver.message_controller.delete(queue, posted[0], project=project,
                                     claim=claim_id)
    assert left_in(driver, queue, project) == []


def test_a_bulk_delete_that_fails_in_swift_raises(driver, project):
    # Swift's bulk middleware answers 200 and reports failures in its
    # body. A name Swift refuses (a NUL byte: 412 Precondition Failed) in
    # a batch with a real object and an absent one: the call raises,
    # while the absent name alone is no failure and the object is gone.
    from zaqar_delay import errors
    from zaqar_delay.drivers.swift import names
    store = driver.store
    container = names.container(names.MESSAGES, 'bulk-check', project)
    store.put(container, 'x/kept')
    with pytest.raises(errors.BackendUnavailable, match='412'):
        store.delete_many(container, ['x/kept', 'x/absent', 'x/bad\x00'])
    store.put(container, 'x/kept')
    store.delete_many(container, ['x/kept', 'x/absent'])
    assert store.head(container, 'x/kept') is None
