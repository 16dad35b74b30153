"""Claims, redelivery and dead letters (Zaqar's claim contract, SPEC §6)."""

import pytest
from zaqar.storage import errors as storage_errors

from tests.contract.helpers import (bodies, claim, claimed_bodies, listed,
                                    post, stats)
from zaqar_delay import errors


def test_claim_hands_out_oldest_first_and_never_twice(driver, make_queue,
                                                      project):
    queue = make_queue()
    post(driver, queue, project, *range(5))
    claim_id, messages = claim(driver, queue, project, limit=3)
    assert bodies(messages) == [0, 1, 2]
    assert all(m['claim_id'] == claim_id and m['claim_count'] == 1
               for m in messages)
    assert claimed_bodies(driver, queue, project) == [3, 4]
    assert claim(driver, queue, project) == (None, [])


def test_a_claim_id_not_written_as_we_hand_them_out_names_no_claim(
        driver, make_queue, project):
    queue = make_queue()
    post(driver, queue, project, 'a')
    claim_id, (message,) = claim(driver, queue, project)
    # The same UUID in every other spelling uuid.UUID() would accept.
    for other in (claim_id.upper(), '{%s}' % claim_id,
                  claim_id.replace('-', ''), 'urn:uuid:' + claim_id,
                  claim_id + '\n', ' ' + claim_id, 'x' * 36, ''):
        with pytest.raises(storage_errors.ClaimDoesNotExist):
            driver.claim_controller.get(queue, other, project=project)
        with pytest.raises(storage_errors.ClaimDoesNotExist):
            driver.message_controller.delete(queue, message['id'],
                                             project=project, claim=other)
    # Nothing was deleted or released by those attempts.
    assert driver.claim_controller.get(queue, claim_id,
                                       project=project)[0]['id'] == claim_id
    driver.message_controller.delete(queue, message['id'], project=project,
                                     claim=claim_id)
    assert listed(driver, queue, project) == []


def test_expired_claim_makes_messages_claimable_again_in_order(
        driver, make_queue, project, clock):
    queue = make_queue()
    post(driver, queue, project, 'a', 'b', 'c')
    claim(driver, queue, project, limit=2, ttl=60)
    clock.advance(60)
    claim_id, messages = claim(driver, queue, project)
    assert bodies(messages) == ['a', 'b', 'c']
    assert [m['claim_count'] for m in messages] == [2, 2, 1]


def test_get_update_and_release_a_claim(driver, make_queue, project, clock):
    queue = make_queue()
    post(driver, queue, project, 'a', 'b')
    claims = driver.claim_controller
    claim_id, _ = claim(driver, queue, project, ttl=60)
    meta, messages = claims.get(queue, claim_id, project=project)
    assert meta['id'] == claim_id and meta['ttl'] == 60
    assert bodies(messages) == ['a', 'b']
    clock.advance(50)
    claims.update(queue, claim_id, {'ttl': 100, 'grace': 10},
                  project=project)
    clock.advance(50)
    assert claim(driver, queue, project) == (None, [])
    assert claims.get(queue, claim_id, project=project)[0]['ttl'] == 100
    claims.delete(queue, claim_id, project=project)
    with pytest.raises(storage_errors.ClaimDoesNotExist):
        claims.get(queue, claim_id, project=project)
    with pytest.raises(storage_errors.ClaimDoesNotExist):
        claims.update(queue, claim_id, {'ttl': 60, 'grace': 0},
                      project=project)
    assert claimed_bodies(driver, queue, project) == ['a', 'b']


def test_claim_keeps_messages_alive_until_claim_end_plus_grace(
        driver, make_queue, project, clock):
    queue = make_queue()
    post(driver, queue, project, 'short-lived', ttl=60)
    claim_id, _ = claim(driver, queue, project, ttl=100, grace=50)
    clock.advance(120)
    assert bodies(listed(driver, queue, project,
                         include_claimed=True)) == ['short-lived']
    clock.advance(31)
    assert listed(driver, queue, project, include_claimed=True) == []


def test_deleting_claimed_messages_leaves_the_rest_of_the_claim(
        driver, make_queue, project):
    queue = make_queue()
    ids = post(driver, queue, project, 'a', 'b')
    claim_id, _ = claim(driver, queue, project)
    driver.message_controller.delete(queue, ids[0], project=project,
                                     claim=claim_id)
    meta, messages = driver.claim_controller.get(queue, claim_id,
                                                 project=project)
    assert bodies(messages) == ['b']


def test_redelivery_delay_applies_after_expiry_and_release(
        driver, make_queue, project, clock):
    queue = make_queue({'_redelivery_delay': 30})
    post(driver, queue, project, 'a')
    claim_id, _ = claim(driver, queue, project, ttl=60)
    clock.advance(60)
    assert claim(driver, queue, project) == (None, [])
    clock.advance(30)
    claim_id, messages = claim(driver, queue, project)
    assert bodies(messages) == ['a']
    driver.claim_controller.delete(queue, claim_id, project=project)
    clock.advance(29)
    assert claim(driver, queue, project) == (None, [])
    clock.advance(1)
    assert claimed_bodies(driver, queue, project) == ['a']


def test_exhausted_messages_move_to_the_dead_letter_queue(
        driver, make_queue, project, clock):
    dlq = make_queue()
    queue = make_queue({'_max_claim_count': 2, '_dead_letter_queue': dlq,
                        '_dead_letter_queue_messages_ttl': 500})
    ids = post(driver, queue, project, 'poison', 'fine')
    for _ in range(2):
        _, messages = claim(driver, queue, project, limit=1, ttl=60)
        assert bodies(messages) == ['poison']
        clock.advance(60)
    claim_id, messages = claim(driver, queue, project, limit=1)
    assert bodies(messages) == ['fine']
    moved = listed(driver, dlq, project)
    assert [m['id'] for m in moved] == [ids[0]]
    assert moved[0]['ttl'] == 500 and moved[0]['body'] == 'poison'
    assert stats(driver, queue, project)['total'] == 1


def test_dead_letter_queue_is_created_when_missing(driver, make_queue,
                                                   project, clock):
    queue = make_queue({'_max_claim_count': 1,
                        '_dead_letter_queue': 'dlq-made-on-demand'})
    post(driver, queue, project, 'poison')
    claim(driver, queue, project, ttl=60)
    clock.advance(60)
    assert claim(driver, queue, project) == (None, [])
    assert driver.queue_controller.exists('dlq-made-on-demand',
                                          project=project)
    assert bodies(listed(driver, 'dlq-made-on-demand', project)) == [
        'poison']


def test_exhausted_messages_are_dropped_without_dead_letter_queue(
        driver, make_queue, project, clock):
    queue = make_queue({'_max_claim_count': 1})
    post(driver, queue, project, 'poison')
    claim(driver, queue, project, ttl=60)
    clock.advance(60)
    assert claim(driver, queue, project) == (None, [])
    assert stats(driver, queue, project)['total'] == 0


@pytest.mark.parametrize('limit', [1, 2])
def test_a_pop_dead_letters_what_has_no_attempt_left(
        driver, make_queue, project, clock, limit):
    # 'poison' was claimed _max_claim_count times and never deleted: a
    # pop must move it to the dead-letter queue, not return it, and
    # still pop the next message (as a claim would hand it out).
    dlq = make_queue()
    queue = make_queue({'_max_claim_count': 1, '_dead_letter_queue': dlq})
    ids = post(driver, queue, project, 'poison', 'fine', 'later')
    claim(driver, queue, project, limit=1, ttl=60)
    clock.advance(60)
    popped = driver.message_controller.pop(queue, limit, project=project)
    assert bodies(popped) == ['fine', 'later'][:limit]
    assert [(m['id'], m['body']) for m in listed(driver, dlq, project)] == [
        (ids[0], 'poison')]
    assert bodies(listed(driver, queue, project, include_claimed=True)) == (
        ['later'][:2 - limit])


def test_pop_claims_and_deletes_in_one_step(driver, make_queue, project):
    queue = make_queue()
    post(driver, queue, project, 'a', 'b', 'c')
    assert bodies(driver.message_controller.pop(queue, 2,
                                                project=project)) == ['a', 'b']
    assert bodies(listed(driver, queue, project,
                         include_claimed=True)) == ['c']


@pytest.mark.parametrize('meta', [
    {'ttl': 0, 'grace': 0}, {'ttl': True, 'grace': 0},
    {'ttl': 60, 'grace': -1}, {'ttl': '60', 'grace': 0}, {'grace': 0},
])
def test_bad_claim_metadata_is_refused_and_claims_nothing(
        driver, make_queue, project, meta):
    queue = make_queue()
    post(driver, queue, project, 'a')
    with pytest.raises(errors.InvalidInput):
        driver.claim_controller.create(queue, meta, project=project)
    assert stats(driver, queue, project)['claimed'] == 0


@pytest.mark.parametrize('meta', [
    {'_max_claim_count': True}, {'_max_claim_count': 0},
    {'_redelivery_delay': -5}, {'_redelivery_delay': 1.5},
    {'_dead_letter_queue': 7}, {'_dead_letter_queue_messages_ttl': 'x'},
])
def test_bad_redelivery_metadata_is_refused_at_claim(driver, make_queue,
                                                     project, meta):
    queue = make_queue(meta)
    driver.queue_controller.set_metadata(queue, {}, project=project)
    post(driver, queue, project, 'a')
    driver.queue_controller.set_metadata(queue, meta, project=project)
    with pytest.raises(errors.InvalidInput, match=list(meta)[0]):
        claim(driver, queue, project)
    assert stats(driver, queue, project)['claimed'] == 0


def test_a_renewal_keeps_the_ttl_its_claim_grew(driver, make_queue, project,
                                                clock):
    # A claimed message's ttl grows to the claim's ttl + grace, as on
    # Zaqar's drivers; renewing with the same ttl and grace (a consumer
    # renewing as it works) keeps it. Swift's object POST replaces every
    # metadata item, and the ttl fell back to the posted one.
    queue = make_queue()
    message_id = post(driver, queue, project, 'm', ttl=120)[0]
    claim_id, _ = claim(driver, queue, project, ttl=300, grace=60)
    messages = driver.message_controller
    assert messages.get(queue, message_id, project=project)['ttl'] == 360
    clock.advance(100)
    driver.claim_controller.update(queue, claim_id,
                                   {'ttl': 300, 'grace': 60},
                                   project=project)
    assert messages.get(queue, message_id, project=project)['ttl'] == 360
