"""Swift: a claim's locks carry its expiry, so its claimer's delete reads
no claim record; renewals and releases keep them from saying more than
the record (names.py, ``l/``)."""

import uuid

import pytest
from zaqar.storage import errors as storage_errors

from tests.contract.helpers import claim, post
from tests.swift.test_round_trips import record_kinds
from zaqar_delay.drivers.swift import names


def lock_fields(driver, queue, project, message_id, attempt=1):
    qs = driver.queue_state(queue, project)
    found = driver.store.head(qs.c, names.lock_obj(message_id, attempt))
    return names.ct_params(found.get('content-type'))


def claimed(driver, make_queue, project, ttl):
    """(queue, claim id, messages) of one message posted and claimed."""
    queue = make_queue()
    post(driver, queue, project, 'x')
    return (queue,) + claim(driver, queue, project, ttl=ttl)


def assert_refused(driver, queue, project, message_id, claim_id, error):
    """A delete of ``message_id`` under ``claim_id`` raises ``error``."""
    with pytest.raises(error):
        driver.message_controller.delete(queue, message_id,
                                         project=project, claim=claim_id)


def assert_taken_from(driver, queue, project, got, claim_id, rival,
                      taken):
    """The rival claim took the one message ``got`` under ``claim_id``:
    only the rival's delete removes it."""
    assert [m['id'] for m in taken] == [got[0]['id']]
    assert_refused(driver, queue, project, got[0]['id'], claim_id,
                   storage_errors.MessageNotClaimedBy)
    driver.message_controller.delete(queue, got[0]['id'], project=project,
                                     claim=rival)


def record_expiry(driver, queue, project, claim_id):
    qs = driver.queue_state(queue, project)
    return qs.claim_record(claim_id)['e']


def delete_as_claimer(driver, queue, project, message_id, claim_id,
                      monkeypatch):
    """Delete under the claim; the kinds of request it sent. Asserts the
    message went."""
    kinds = record_kinds(driver, monkeypatch)
    driver.message_controller.delete(queue, message_id, project=project,
                                     claim=claim_id)
    monkeypatch.undo()
    assert list(driver.message_controller.bulk_get(
        queue, [message_id], project=project)) == []
    return kinds


def renew_meanwhile(driver, queue, project, claim_id, ttl, meanwhile,
                    monkeypatch):
    """Renew the claim to ``ttl``, running ``meanwhile(record)`` once
    just before the renewal writes the claim's record (what it will
    write); returns what ``meanwhile`` returned."""
    qs_type = type(driver.queue_state(queue, project))
    write_claim, ran = qs_type.write_claim, []

    def write(self, cid, record):
        if cid == claim_id and not ran:
            ran.append(None)    # before: ``meanwhile`` may renew too
            ran[0] = meanwhile(dict(record))
        return write_claim(self, cid, record)

    monkeypatch.setattr(qs_type, 'write_claim', write)
    driver.claim_controller.update(queue, claim_id, {'ttl': ttl},
                                   project=project)
    monkeypatch.undo()
    assert ran, 'the renewal wrote no record'
    return ran[0]


def test_a_claims_lock_carries_its_expiry_position_and_group(
        driver, make_queue, project, clock):
    queue = make_queue({'_message_group_key': 'g'})
    post(driver, queue, project, {'g': 'a', 'n': 1})
    claim_id, got = claim(driver, queue, project, ttl=60)
    fields = lock_fields(driver, queue, project, got[0]['id'])
    qs = driver.queue_state(queue, project)
    [position] = driver.store.listing(qs.c, 'p/')
    [member] = driver.store.listing(qs.c, 'g/')
    assert fields['c'] == claim_id
    assert int(fields['e']) == record_expiry(driver, queue, project,
                                             claim_id)
    assert int(fields['p']) == int(position['name'][2:])
    assert fields['g'] == names.parse_group_entry(member['name'])[0]


def test_a_released_claims_delete_is_refused_though_its_lock_stays(
        driver, make_queue, project):
    # The lock stays as the attempt's record; the release takes its
    # expiry off before the claim's record goes, so the delete asks the
    # record, finds none, and refuses as before.
    queue, claim_id, got = claimed(driver, make_queue, project, ttl=60)
    driver.claim_controller.delete(queue, claim_id, project=project)
    fields = lock_fields(driver, queue, project, got[0]['id'])
    assert fields['c'] == claim_id and 'e' not in fields
    assert_refused(driver, queue, project, got[0]['id'], claim_id,
                   storage_errors.MessageNotClaimed)
    assert driver.message_controller.get(queue, got[0]['id'],
                                         project=project)['id'] == \
        got[0]['id']


def test_a_shortened_claim_cannot_delete_once_its_new_expiry_passed(
        driver, make_queue, project, clock):
    queue, claim_id, got = claimed(driver, make_queue, project, ttl=300)
    driver.claim_controller.update(queue, claim_id, {'ttl': 60},
                                   project=project)
    fields = lock_fields(driver, queue, project, got[0]['id'])
    assert int(fields['e']) == record_expiry(driver, queue, project,
                                             claim_id)
    clock.advance(61)
    # Still inside the 300 s first asked for: the lock must not say so.
    assert_refused(driver, queue, project, got[0]['id'], claim_id,
                   storage_errors.MessageNotClaimed)


def test_a_shortening_renewal_lowers_the_locks_before_the_record(
        driver, make_queue, project, clock, monkeypatch):
    # A renewal that fails between the two leaves locks that say less
    # than the record, never more.
    queue, claim_id, got = claimed(driver, make_queue, project, ttl=300)
    before = record_expiry(driver, queue, project, claim_id)
    qs_type = type(driver.queue_state(queue, project))

    def fail(*args, **kwargs):
        raise RuntimeError('the record write failed')

    monkeypatch.setattr(qs_type, 'write_claim', fail)
    with pytest.raises(RuntimeError):
        driver.claim_controller.update(queue, claim_id, {'ttl': 60},
                                       project=project)
    monkeypatch.undo()
    assert record_expiry(driver, queue, project, claim_id) == before
    assert int(lock_fields(driver, queue, project,
                           got[0]['id'])['e']) < before
    # Past what the locks say, within what the record says: the delete
    # asks the record, which decides.
    clock.advance(61)
    kinds = delete_as_claimer(driver, queue, project, got[0]['id'],
                              claim_id, monkeypatch)
    assert ('get_object', 'c/') in kinds, kinds


def test_a_longer_renewal_leaves_the_locks_so_later_deletes_ask_the_record(
        driver, make_queue, project, clock, monkeypatch):
    queue, claim_id, got = claimed(driver, make_queue, project, ttl=60)
    first = record_expiry(driver, queue, project, claim_id)
    driver.claim_controller.update(queue, claim_id, {'ttl': 600},
                                   project=project)
    assert int(lock_fields(driver, queue, project, got[0]['id'])['e']) \
        == first < record_expiry(driver, queue, project, claim_id)
    clock.advance(120)
    # Past the first expiry, within the renewed one: the record decides.
    kinds = delete_as_claimer(driver, queue, project, got[0]['id'],
                              claim_id, monkeypatch)
    assert ('get_object', 'c/') in kinds, kinds


def test_a_lock_written_without_an_expiry_sends_the_delete_to_the_record(
        driver, make_queue, project, monkeypatch):
    # Locks of claims made before 2026-12-06 name only the claim.
    queue, claim_id, got = claimed(driver, make_queue, project, ttl=60)
    qs = driver.queue_state(queue, project)
    assert driver.store.post(qs.c, names.lock_obj(got[0]['id'], 1), {
        'Content-Type': names.content_type(c=claim_id)})
    kinds = delete_as_claimer(driver, queue, project, got[0]['id'],
                              claim_id, monkeypatch)
    assert ('get_object', 'c/') in kinds, kinds


def test_an_expired_lock_is_not_taken_for_a_live_claim(
        driver, make_queue, project, clock):
    queue, claim_id, got = claimed(driver, make_queue, project, ttl=60)
    clock.advance(61)
    assert_refused(driver, queue, project, got[0]['id'], claim_id,
                   storage_errors.MessageNotClaimed)


def test_a_claim_within_the_safety_margin_asks_for_a_later_attempt(
        driver, make_queue, project, clock, monkeypatch):
    # Under 2 s (claims.SAFETY_MS) before its expiry, a node whose clock
    # runs that much ahead may have ended the claim and another won the
    # next attempt: the delete asks for it, and is refused.
    queue, claim_id, got = claimed(driver, make_queue, project, ttl=60)
    qs = driver.queue_state(queue, project)
    clock.advance(59)
    rival = str(uuid.uuid4())
    qs.write_claim(rival, {'t': 60, 'g': 60, 'e': driver.now_ms() + 60000,
                           'rd': 0, 'm': [[got[0]['id'], 0, 2]]})
    assert driver.store.create(qs.c, names.lock_obj(got[0]['id'], 2),
                               content_type=names.content_type(c=rival))
    kinds = record_kinds(driver, monkeypatch)
    assert_refused(driver, queue, project, got[0]['id'], claim_id,
                   storage_errors.MessageNotClaimedBy)
    monkeypatch.undo()
    assert ('head_object', 'l/2') in kinds, kinds


def test_crossing_renewals_leave_no_lock_saying_more_than_the_record(
        driver, make_queue, project, clock, monkeypatch):
    # A client shortens its claim to 60 s, loses the reply and retries
    # 30 s later. The retry runs whole after the first lowered the locks
    # and before it writes the record: without a second look the locks
    # would say the retry's expiry and the record the first one's, and
    # the claimer's delete would go by the locks past the claim's end.
    queue, claim_id, got = claimed(driver, make_queue, project, ttl=600)

    def retry(record):
        clock.advance(30)
        driver.claim_controller.update(queue, claim_id, {'ttl': 60},
                                       project=project)
        return record['e']

    first = renew_meanwhile(driver, queue, project, claim_id, 60, retry,
                            monkeypatch)
    expiry = record_expiry(driver, queue, project, claim_id)
    assert expiry == first, 'the first renewal wrote last'
    fields = lock_fields(driver, queue, project, got[0]['id'])
    assert 'e' not in fields or int(fields['e']) <= expiry, fields
    clock.advance(31)
    assert_refused(driver, queue, project, got[0]['id'], claim_id,
                   storage_errors.MessageNotClaimed)


def test_a_renewal_landing_after_its_claim_ended_lets_no_stale_delete(
        driver, make_queue, project, clock, monkeypatch):
    # The renewal reads its claim alive a second before it ends; before
    # it writes the record, the claim ends, another consumer's claim
    # settles it and takes the message, and the renewal then writes the
    # record again. Its claimer's delete must be refused: the message is
    # the other consumer's.
    queue, claim_id, got = claimed(driver, make_queue, project, ttl=60)
    clock.advance(59)

    def end_and_take(record):
        clock.advance(2)
        return claim(driver, queue, project, ttl=60)

    rival, taken = renew_meanwhile(driver, queue, project, claim_id, 600,
                                   end_and_take, monkeypatch)
    assert_taken_from(driver, queue, project, got, claim_id, rival, taken)


def test_a_shorter_renewal_crossing_a_release_lets_no_stale_delete(
        driver, make_queue, project, monkeypatch):
    # Tried: a client shortens its claim and releases it at once (or a
    # retried renewal crosses the release): the renewal reads the claim
    # alive, the release runs to its end before the renewal writes the
    # record, and the renewal then writes the record again and lowers the
    # locks' expiry. Another consumer takes the message; the first
    # claimer's delete must be refused, and the renewal reports the claim
    # gone.
    queue, claim_id, got = claimed(driver, make_queue, project, ttl=600)

    def release(record):
        driver.claim_controller.delete(queue, claim_id, project=project)

    with pytest.raises(storage_errors.ClaimDoesNotExist):
        renew_meanwhile(driver, queue, project, claim_id, 300, release,
                        monkeypatch)
    qs = driver.queue_state(queue, project)
    assert qs.claim_record(claim_id) is None
    rival, taken = claim(driver, queue, project, ttl=60)
    assert_taken_from(driver, queue, project, got, claim_id, rival, taken)


def test_a_shorter_renewal_after_a_release_finds_the_claim_gone(
        driver, make_queue, project):
    # The marker changes nothing for a renewal that comes after the
    # release: the claim is gone, as before.
    queue, claim_id, got = claimed(driver, make_queue, project, ttl=600)
    driver.claim_controller.delete(queue, claim_id, project=project)
    with pytest.raises(storage_errors.ClaimDoesNotExist):
        driver.claim_controller.update(queue, claim_id, {'ttl': 300},
                                       project=project)
    assert [m['id'] for m in claim(driver, queue, project)[1]] == [
        got[0]['id']]
