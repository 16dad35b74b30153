"""Posting, listing, getting and deleting: Zaqar's message contract."""

import uuid

import pytest
from zaqar.storage import errors as storage_errors

from tests.contract.helpers import (CLIENT, OTHER_CLIENT, bodies, claim,
                                    listed, post)


def test_post_returns_ids_in_order_and_list_keeps_posting_order(
        driver, make_queue, project):
    queue = make_queue()
    ids = post(driver, queue, project, *range(25))
    assert len(set(ids)) == 25
    messages = listed(driver, queue, project, limit=10)
    assert [m['id'] for m in messages] == ids
    assert bodies(messages) == list(range(25))


def test_posted_ids_are_random_version_4_uuids_as_zaqar_writes_them(
        driver, make_queue, project):
    queue = make_queue()
    ids = post(driver, queue, project, *range(20))
    ids += post(driver, queue, project, *range(20))
    assert len(set(ids)) == 40
    for message_id in ids:
        parsed = uuid.UUID(message_id)
        assert str(parsed) == message_id
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
    # Every variant nibble RFC 4122 allows turns up (8, 9, a, b), not one.
    assert len({message_id[19] for message_id in ids}) > 1


def test_list_pages_are_full_and_markers_advance(driver, make_queue, project):
    queue = make_queue()
    post(driver, queue, project, *range(25))
    pages = driver.message_controller.list(queue, project=project, limit=10,
                                           echo=True)
    first = list(next(pages))
    marker = next(pages)
    pages = driver.message_controller.list(queue, project=project, limit=10,
                                           echo=True, marker=marker)
    second = list(next(pages))
    assert bodies(first) == list(range(10))
    assert bodies(second) == list(range(10, 20))


def test_list_without_echo_hides_own_messages_but_keeps_pages_full(
        driver, make_queue, project):
    queue = make_queue()
    post(driver, queue, project, *range(15), client=CLIENT)
    post(driver, queue, project, *range(100, 105), client=OTHER_CLIENT)
    pages = driver.message_controller.list(queue, project=project, limit=5,
                                           echo=False, client_uuid=CLIENT)
    assert bodies(next(pages)) == list(range(100, 105))


def test_list_hides_claimed_messages_unless_asked(driver, make_queue,
                                                  project):
    queue = make_queue()
    post(driver, queue, project, 'a', 'b', 'c')
    claim(driver, queue, project, limit=1)
    assert bodies(listed(driver, queue, project)) == ['b', 'c']
    assert bodies(listed(driver, queue, project, include_claimed=True)) == [
        'a', 'b', 'c']


# 2**63 and up: no position of any store (MongoDB's are int64, which
# pymongo cannot encode past 2**63 - 1).
@pytest.mark.parametrize('marker', ['{"$gt": ""}', 'xyz', '-1', '1e3',
                                    str(2 ** 63), str(10 ** 30), '0_0',
                                    ' 0', '\u0660', '+0'])
def test_unknown_marker_lists_an_empty_page(driver, make_queue, project,
                                            marker):
    # Zaqar's contract: a marker no listing returned lists nothing (it is
    # never interpreted as a query), and the page keeps that marker. The
    # last four are what int() reads as 0, before every position.
    queue = make_queue()
    post(driver, queue, project, 'a')
    pages = driver.message_controller.list(queue, project=project,
                                           marker=marker, echo=True)
    assert list(next(pages)) == []
    assert next(pages) == marker


def test_get_and_bulk_get(driver, make_queue, project):
    queue = make_queue()
    ids = post(driver, queue, project, {'n': 1}, {'n': 2})
    message = driver.message_controller.get(queue, ids[1], project=project)
    assert message['body'] == {'n': 2} and message['ttl'] == 300
    assert message['age'] >= 0
    found = list(driver.message_controller.bulk_get(
        queue, [ids[0], 'missing', ids[1]], project=project))
    assert [m['id'] for m in found] == [ids[0], ids[1]]
    with pytest.raises(storage_errors.MessageDoesNotExist):
        driver.message_controller.get(queue, 'missing', project=project)


def test_messages_expire_after_their_ttl(driver, make_queue, project, clock):
    queue = make_queue()
    short, long = post(driver, queue, project, 'short', ttl=60)[0], post(
        driver, queue, project, 'long', ttl=120)[0]
    clock.advance(61)
    assert bodies(listed(driver, queue, project)) == ['long']
    with pytest.raises(storage_errors.MessageDoesNotExist):
        driver.message_controller.get(queue, short, project=project)
    assert driver.message_controller.get(queue, long, project=project)


def test_delete_honours_claims(driver, make_queue, project):
    queue = make_queue()
    claimed_id, free_id = post(driver, queue, project, 'claimed', 'free')
    claim_id, _ = claim(driver, queue, project, limit=1)
    messages = driver.message_controller
    with pytest.raises(storage_errors.MessageIsClaimed):
        messages.delete(queue, claimed_id, project=project)
    with pytest.raises(storage_errors.MessageNotClaimedBy):
        messages.delete(queue, claimed_id, project=project,
                        claim='00000000-0000-4000-8000-000000000000')
    with pytest.raises(storage_errors.MessageNotClaimed):
        messages.delete(queue, free_id, project=project, claim=claim_id)
    assert bodies(listed(driver, queue, project,
                         include_claimed=True)) == ['claimed', 'free']
    messages.delete(queue, claimed_id, project=project, claim=claim_id)
    messages.delete(queue, free_id, project=project)
    messages.delete(queue, 'never-existed', project=project)
    assert listed(driver, queue, project, include_claimed=True) == []


def test_bulk_delete_with_wrong_claim_deletes_nothing(driver, make_queue,
                                                      project):
    queue = make_queue()
    ids = post(driver, queue, project, 'a', 'b')
    claim(driver, queue, project, limit=1)
    with pytest.raises(storage_errors.ClaimDoesNotMatch):
        driver.message_controller.bulk_delete(
            queue, ids, project=project,
            claim_ids=['00000000-0000-4000-8000-000000000000'])
    assert len(listed(driver, queue, project, include_claimed=True)) == 2
    driver.message_controller.bulk_delete(queue, ids, project=project)
    assert listed(driver, queue, project, include_claimed=True) == []


def test_first_gives_oldest_and_newest_and_raises_when_empty(
        driver, make_queue, project):
    queue = make_queue()
    with pytest.raises(storage_errors.QueueIsEmpty):
        driver.message_controller.first(queue, project=project)
    ids = post(driver, queue, project, 'old', 'mid', 'new')
    assert driver.message_controller.first(queue, project, 1)['id'] == ids[0]
    newest = driver.message_controller.first(queue, project, -1)
    assert newest['id'] == ids[2] and newest['created'].endswith('Z')


def test_projects_are_isolated_whatever_the_names(driver, make_queue,
                                                  project):
    other = project + '}/{:x'
    queue = make_queue()
    driver.queue_controller.create(queue, project=other)
    post(driver, queue, project, 'mine')
    post(driver, queue, other, 'theirs')
    assert bodies(listed(driver, queue, project)) == ['mine']
    assert bodies(claim(driver, queue, other)[1]) == ['theirs']
    assert driver.message_controller.stats(
        queue, project)['messages']['total'] == 1


def test_post_to_missing_queue_raises(driver, project):
    with pytest.raises(storage_errors.QueueDoesNotExist):
        post(driver, 'no-such-queue', project, 'x')


@pytest.mark.parametrize('bad', [
    {'body': 1},                      # no ttl
    {'ttl': 0, 'body': 1},
    {'ttl': True, 'body': 1},
    {'ttl': 60.5, 'body': 1},
    {'ttl': 60},                      # no body
    {'ttl': 60, 'body': float('nan')},
])
def test_bad_messages_are_refused_and_nothing_is_stored(
        driver, make_queue, project, bad):
    queue = make_queue()
    with pytest.raises(storage_errors.ExceptionBase):
        driver.message_controller.post(
            queue, [{'ttl': 60, 'body': 'good'}, bad], CLIENT,
            project=project)
    assert listed(driver, queue, project, include_delayed=True) == []


def test_bodies_are_data(driver, make_queue, project):
    queue = make_queue()
    tricky = [{'$where': 'sleep(1000)', 'a.b': {'$gt': ''}},
              'Q:m:*} {x', '\u2603 \U0001F600', {'': None, 'k': [1, 2]},
              'x' * 100000]
    post(driver, queue, project, *tricky)
    assert bodies(listed(driver, queue, project)) == tricky
