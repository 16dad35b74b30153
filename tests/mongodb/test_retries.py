"""MongoDB: a pop whose delete loses its reply still returns its batch;
one whose claim step loses it loses no message; a bulk delete, a claim's
dead-letter drop or an unpin cut short by a lost reply has, once the
client sends it again, the effect of one call.

pymongo retries single-document writes itself (exactly once, by the
server's retryable writes); a pop's delete is a multi-document write, so
the driver sends it again and returns the batch it holds. Other
multi-document writes surface a lost reply as a 503, and the client
sends the call again.
"""

import pytest

from tests.contract.helpers import bodies, claim, listed, post
from tests.contract.test_sticky import ALICE, BOB, STICKY
from tests.contract.test_sticky import claim_as, msg, names
from zaqar_delay import errors
from zaqar_delay.drivers.mongodb import claims
from zaqar_delay.drivers.mongodb import fields
from zaqar_delay.drivers.mongodb import pins

GROUPED = {'_message_group_key': 'g'}


def lose_reply_once(monkeypatch, collection, method, applies=True,
                    when=lambda *a, **k: True, meanwhile=None):
    """``collection.method`` runs (unless not ``applies``: the request
    never reached the server) and then raises as if its reply was lost,
    the first time ``when`` holds; ``meanwhile()`` runs before that
    raise, as what happened while the reply was on its way."""
    real = getattr(collection, method)
    fired = []

    def wrapper(*args, **kwargs):
        if not fired and when(*args, **kwargs):
            fired.append(args)
            if applies:
                real(*args, **kwargs)
            if meanwhile is not None:
                meanwhile()
            raise errors.BackendUnavailable(backend='MongoDB',
                                            reason='reply lost')
        return real(*args, **kwargs)

    monkeypatch.setattr(collection, method, wrapper)
    return fired


def test_a_pop_whose_delete_reply_is_lost_returns_its_batch(
        driver, project, monkeypatch):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a', 'b', 'c')
    lost = lose_reply_once(monkeypatch, driver.messages, 'delete_many')
    popped = driver.message_controller.pop('q', 2, project=project)
    assert lost
    assert [m['body'] for m in popped] == ['a', 'b']
    assert [m['body'] for m in listed(driver, 'q', project,
                                      include_claimed=True)] == ['c']


def test_a_pop_whose_claim_ended_before_its_delete_was_confirmed_is_a_503(
        driver, project, monkeypatch, clock):
    # docs/reliability.md: a pop returns only what its delete removed
    # under its own claim. Here the delete's reply is lost and the pop's
    # claim ends before the retry: the messages gone by then may have
    # been given back and taken by another consumer, so the pop answers
    # 503 rather than hand them out twice.
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a', 'b')

    def claim_ends_and_gc_settles_it():
        clock.advance(claims.POP_CLAIM_TTL + 1)
        driver.gc()

    lost = lose_reply_once(monkeypatch, driver.messages, 'delete_many',
                           meanwhile=claim_ends_and_gc_settles_it)
    with pytest.raises(errors.BackendUnavailable,
                       match='ended before its delete was confirmed'):
        driver.message_controller.pop('q', 2, project=project)
    assert lost


def test_a_pop_whose_claim_step_loses_its_reply_loses_no_message(
        driver, project, monkeypatch, clock):
    # The step that takes the message (a findAndModify for a pop of one)
    # ran, and its reply was lost: the pop fails (503), and the message,
    # held by a pop claim nobody got, comes back when that claim ends.
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'only')
    original = driver.messages.find_one_and_update

    def find_one_and_update(*args, **kwargs):
        original(*args, **kwargs)
        raise errors.BackendUnavailable(backend='MongoDB',
                                        reason='reply lost')

    monkeypatch.setattr(driver.messages, 'find_one_and_update',
                        find_one_and_update)
    with pytest.raises(errors.BackendUnavailable):
        driver.message_controller.pop('q', 1, project=project)
    monkeypatch.undo()
    assert driver.message_controller.pop('q', 1, project=project) == []
    clock.advance(claims.POP_CLAIM_TTL + 1)
    popped = driver.message_controller.pop('q', 1, project=project)
    assert [m['body'] for m in popped] == ['only']


def test_a_bulk_delete_retried_after_a_lost_reply_frees_the_group(
        driver, make_queue, project, monkeypatch):
    """The head's bulk delete ran and its reply was lost (503); the
    client's retry found nothing to delete and advanced nothing, so the
    group waited for gc's repair."""
    queue = make_queue(GROUPED)
    post(driver, queue, project, {'g': 'x', 'n': 1}, {'g': 'x', 'n': 2},
         ttl=3600)
    claim_id, got = claim(driver, queue, project)
    assert bodies(got) == [{'g': 'x', 'n': 1}]
    lose_reply_once(monkeypatch, driver.messages, 'delete_many')
    with pytest.raises(errors.BackendUnavailable):
        driver.message_controller.bulk_delete(
            queue, [got[0]['id']], project=project, claim_ids=[claim_id])
    monkeypatch.undo()
    driver.message_controller.bulk_delete(
        queue, [got[0]['id']], project=project, claim_ids=[claim_id])
    assert bodies(claim(driver, queue, project)[1]) == [{'g': 'x', 'n': 2}]


def test_a_claim_whose_dead_letter_drop_lost_its_reply_frees_the_group(
        driver, make_queue, project, monkeypatch, clock):
    """No dead-letter queue: a claim drops the exhausted head, the
    drop's reply is lost, the claim answers 503 and the client claims
    again: the rest of the group must be claimable then."""
    queue = make_queue(dict(GROUPED, _max_claim_count=1))
    post(driver, queue, project, {'g': 'x', 'n': 1}, {'g': 'x', 'n': 2},
         ttl=36000)
    claim(driver, queue, project, ttl=60)
    clock.advance(61)
    claim_again_after_a_lost_delete_reply(driver, queue, project,
                                          monkeypatch, 'c')


def test_an_unpin_retried_after_a_503_frees_the_group(
        driver, make_queue, project, monkeypatch):
    """The unpin deleted the pin, then its update taking the pin off the
    head failed (it never ran); the operator's retry found no pin and
    did nothing, leaving the head pinned to a client with no pin, which
    nothing would ever free."""
    queue = make_queue(STICKY)
    post(driver, queue, project, msg('a', 1), msg('a', 2), ttl=3600)
    claim_id, got = claim_as(ALICE, driver, queue, project)
    assert names(got) == ['a1']
    driver.claim_controller.delete(queue, claim_id, project=project)
    lose_reply_once(monkeypatch, driver.messages, 'update_many',
                    applies=False,
                    when=lambda where, change, *a, **k:
                    change.get('$unset', {}).keys() == {'pn'})
    with pytest.raises(errors.BackendUnavailable):
        driver.message_controller.unpin_group(queue, 'a', project=project)
    monkeypatch.undo()
    assert driver.message_controller.unpin_group(
        queue, 'a', project=project) is None
    # Alice is still active: only an unpinned group goes to Bob.
    assert names(claim_as(BOB, driver, queue, project)[1]) == ['a1']


def test_an_unpin_finding_no_pin_keeps_a_pin_a_claim_made_meanwhile(
        driver, make_queue, project, monkeypatch):
    """What the retry above takes off is only a leftover: a claim that
    pins the group between the unpin's read of the pin and its update
    (the claim writes its pin, then the head's) keeps its pin."""
    queue = make_queue(STICKY)
    post(driver, queue, project, msg('a', 1), msg('a', 2), ttl=3600)
    read_pin, claimed = pins.head_pin, []

    def claim_lands_after_the_read(*args):
        found = read_pin(*args)
        if not claimed:
            claimed.append(None)        # the claim reads the pin too
            claimed[0] = claim_as(ALICE, driver, queue, project)
        return found

    monkeypatch.setattr(pins, 'head_pin', claim_lands_after_the_read)
    assert driver.message_controller.unpin_group(
        queue, 'a', project=project) is None
    monkeypatch.undo()
    claim_id, got = claimed[0]
    assert names(got) == ['a1']
    driver.claim_controller.delete(queue, claim_id, project=project)
    # Alice is active and the group is pinned to her: nothing for Bob.
    assert names(claim_as(BOB, driver, queue, project)[1]) == []


def test_a_claim_retried_after_its_expiry_purge_lost_its_reply(
        driver, make_queue, project, monkeypatch, clock):
    """A claim's settle deletes the expired head of a group (its
    deleteMany's reply is lost: 503); the client's claim again finds it
    gone and advances nothing, so the live rest of the group waits for
    gc's repair."""
    queue = make_queue(GROUPED)
    post(driver, queue, project, {'g': 'x', 'n': 1}, ttl=60)
    post(driver, queue, project, {'g': 'x', 'n': 2}, ttl=3600)
    clock.advance(61)
    claim_again_after_a_lost_delete_reply(driver, queue, project,
                                          monkeypatch, 'e')


def test_a_claim_retried_after_its_retention_removal_lost_its_reply(
        driver, make_queue, project, monkeypatch):
    """Retention (length 1) removes the head of group x inside a claim;
    the removal's deleteMany reply is lost (503), the client claims
    again: x's next member must be claimable, not stuck behind a head
    that is gone until gc repairs it."""
    queue = make_queue(dict(GROUPED, _retention={'length': 2}))
    post(driver, queue, project, {'g': 'x', 'n': 1}, {'g': 'x', 'n': 2},
         {'g': 'y', 'n': 3}, ttl=3600)
    lose_reply_once(monkeypatch, driver.messages, 'delete_many')
    with pytest.raises(errors.BackendUnavailable):
        claim(driver, queue, project)
    monkeypatch.undo()
    assert sorted(m['n'] for m in bodies(claim(driver, queue, project)[1])) \
        == [2, 3]


def _lands_in(queue):
    """Whether an update_one call moves a message into ``queue``."""
    def when(where, change, *args, **kwargs):
        return change.get('$set', {}).get(fields.QUEUE) == queue
    return when


def test_a_claim_whose_dead_letter_move_lost_its_reply_frees_the_dlq_group(
        driver, make_queue, project, monkeypatch, clock):
    """The exhausted head moves in place into a grouped dead-letter queue
    (its update ran, its reply was lost: 503). The claim never advances
    the group it joined there, and the client's retry claims on the
    source, which no longer holds it: the dead letter stays blocked with
    no head, unclaimable, until gc's repair reaches that group."""
    dlq = make_queue(GROUPED)
    queue = make_queue(dict(GROUPED, _max_claim_count=1,
                            _dead_letter_queue=dlq))
    post(driver, queue, project, {'g': 'x', 'n': 1}, ttl=36000)
    claim(driver, queue, project, ttl=60)
    clock.advance(61)
    lose_reply_once(monkeypatch, driver.messages, 'update_one',
                    when=_lands_in(dlq))
    with pytest.raises(errors.BackendUnavailable):
        claim(driver, queue, project)
    monkeypatch.undo()
    assert bodies(claim(driver, queue, project)[1]) == []
    assert bodies(listed(driver, dlq, project)) == [{'g': 'x', 'n': 1}]
    assert bodies(claim(driver, dlq, project)[1]) == [{'g': 'x', 'n': 1}]


def claim_again_after_a_lost_delete_reply(driver, queue, project,
                                          monkeypatch, field):
    """A claim whose deleteMany filtering on ``field`` loses its reply,
    then the client's claim again: group x's second member."""
    lose_reply_once(monkeypatch, driver.messages, 'delete_many',
                    when=lambda where, *a, **k: field in where)
    with pytest.raises(errors.BackendUnavailable):
        claim(driver, queue, project)
    monkeypatch.undo()
    assert bodies(claim(driver, queue, project)[1]) == [{'g': 'x', 'n': 2}]


def test_a_move_group_retried_after_a_lost_landing_reply_finishes_it(
        driver, make_queue, project, monkeypatch):
    """A committed move landed its first message and the reply was lost
    (503; the page's bulk write was cut after its first update). The
    retry answered GroupInFlight, the group split between the two queues
    (the rest frozen, seen in neither) until gc finished the move
    MOVE_TIMEOUT later, and the landed part had no head."""
    target = make_queue(GROUPED)
    queue = make_queue(GROUPED)
    post(driver, queue, project, {'g': 'a', 'n': 1}, {'g': 'a', 'n': 2},
         ttl=3600)
    bulk, cut = driver.messages.bulk_write, []

    def cut_after_the_first(requests, *args, **kwargs):
        if not cut and _lands_in(target)(None, requests[0]._doc):
            cut.append(len(requests))
            bulk(requests[:1], *args, **kwargs)
            raise errors.BackendUnavailable(backend='MongoDB',
                                            reason='reply lost')
        return bulk(requests, *args, **kwargs)

    monkeypatch.setattr(driver.messages, 'bulk_write', cut_after_the_first,
                        raising=False)
    with pytest.raises(errors.BackendUnavailable):
        driver.message_controller.move_group(queue, 'a', target,
                                             project=project)
    monkeypatch.undo()
    assert cut == [2]
    assert driver.message_controller.move_group(queue, 'a', target,
                                                project=project) == 1
    assert [m['body']['n'] for m in listed(driver, target, project)] == [1, 2]
    assert bodies(claim(driver, target, project)[1]) == [{'g': 'a', 'n': 1}]
    assert listed(driver, queue, project) == []
