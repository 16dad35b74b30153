"""Points of Zaqar's storage contract that an operator switching
``message_store`` relies on (issue 8), beyond what Zaqar's own suites in
tests/zaqar_suites/ check."""

import base64
import hashlib
import json

import pytest
from zaqar.storage import errors as storage_errors

from tests.contract.helpers import CLAIM, claim, listed, post
from zaqar_delay import errors

ZAQAR_KEYS = {'id', 'body', 'ttl', 'age', 'claim_id', 'claim_count'}


def test_message_dicts_have_exactly_zaqars_keys(driver, make_queue, project):
    queue = make_queue()
    first_id, _ = post(driver, queue, project, {'n': 1}, {'n': 2})
    messages = driver.message_controller
    assert set(messages.get(queue, first_id, project=project)) == ZAQAR_KEYS
    for listed_message in listed(driver, queue, project):
        assert set(listed_message) == ZAQAR_KEYS
    assert set(messages.first(queue, project=project)) == ZAQAR_KEYS | {
        'created'}
    _, claimed = claim(driver, queue, project, limit=1)
    assert [set(m) for m in claimed] == [ZAQAR_KEYS]
    assert [set(m) for m in messages.pop(queue, 1, project=project)] == [
        ZAQAR_KEYS]


def test_checksum_is_stored_when_enabled_at_post(driver, make_queue,
                                                 project):
    queue = make_queue()
    body = {'event': 'BackupStarted', 'size': 3}
    plain = post(driver, queue, project, body)[0]
    driver.conf.set_override('enable_checksum', True)
    try:
        summed = post(driver, queue, project, body)[0]
    finally:
        driver.conf.clear_override('enable_checksum')
    messages = driver.message_controller
    expected = 'MD5:' + hashlib.md5(json.dumps(body).encode()).hexdigest()
    got = messages.get(queue, summed, project=project)
    assert got['checksum'] == expected
    # Stored, not recomputed: still there with checksums now off, and a
    # message posted while they were off never shows one.
    assert [m.get('checksum') for m in listed(driver, queue, project)] == [
        None, expected]
    assert 'checksum' not in messages.get(queue, plain, project=project)


def test_claim_grows_the_visible_ttl_to_claim_ttl_plus_grace(
        driver, make_queue, project):
    queue = make_queue()
    long_id, short_id = post(driver, queue, project, 'long', ttl=900)[0], \
        post(driver, queue, project, 'short', ttl=120)[0]
    claim_id, claimed = claim(driver, queue, project, limit=2, ttl=777,
                              grace=23)
    assert [m['ttl'] for m in claimed] == [900, 800]
    messages = driver.message_controller
    assert messages.get(queue, short_id, project=project)['ttl'] == 800
    driver.claim_controller.update(queue, claim_id, {'ttl': 1000,
                                                     'grace': 0},
                                   project=project)
    assert messages.get(queue, short_id, project=project)['ttl'] == 1000
    assert messages.get(queue, long_id, project=project)['ttl'] == 1000


@pytest.mark.parametrize('bad_claim', ['; DROP TABLE queues', '',
                                       '00000000', '{"$ne": null}'])
def test_ill_formed_claim_ids_name_no_claim(driver, make_queue, project,
                                            bad_claim):
    queue = make_queue()
    message_id = post(driver, queue, project, 'kept')[0]
    claim_id, _ = claim(driver, queue, project)
    claims = driver.claim_controller
    with pytest.raises(storage_errors.ClaimDoesNotExist):
        driver.message_controller.delete(queue, message_id, project=project,
                                         claim=bad_claim)
    with pytest.raises(storage_errors.ClaimDoesNotExist):
        claims.get(queue, bad_claim, project=project)
    with pytest.raises(storage_errors.ClaimDoesNotExist):
        claims.update(queue, bad_claim, CLAIM, project=project)
    claims.delete(queue, bad_claim, project=project)
    # Nothing changed: the message is still there under its claim.
    assert [m['claim_id'] for m in listed(driver, queue, project,
                                          include_claimed=True)] == [
        claim_id]


def test_claim_ids_that_are_none_name_no_claim(driver, make_queue, project):
    queue = make_queue()
    with pytest.raises(storage_errors.ClaimDoesNotExist):
        driver.claim_controller.get(queue, None, project=project)
    with pytest.raises(storage_errors.ClaimDoesNotExist):
        driver.claim_controller.update(queue, None, CLAIM, project=project)


def test_claim_and_pop_on_a_missing_queue_take_nothing(driver, project):
    claim_id, messages = driver.claim_controller.create(
        'no-such-queue', CLAIM, project=project)
    assert (claim_id, list(messages)) == (None, [])
    assert driver.message_controller.pop('no-such-queue', 5,
                                         project=project) == []


def test_encrypted_bodies_round_trip_as_their_base64_text(driver, make_queue,
                                                          project):
    # Zaqar's transport encrypts a body into base64 bytes before the driver
    # sees it, and base64-decodes what the driver returns.
    queue = make_queue({'_enable_encrypt_messages': True})
    secret = base64.b64encode(b'\x00\xffcipher text')
    message_id = post(driver, queue, project, secret)[0]
    got = driver.message_controller.get(queue, message_id, project=project)
    assert base64.b64decode(got['body']) == b'\x00\xffcipher text'


def test_bytes_that_are_not_text_are_refused(driver, make_queue, project):
    queue = make_queue()
    with pytest.raises(errors.InvalidInput, match='ASCII'):
        post(driver, queue, project, 'fine', b'\xff\xfe')
    assert listed(driver, queue, project) == []


def test_group_key_on_an_encrypted_queue_is_refused(driver, make_queue,
                                                    project):
    # The group id would have to be read from a body the driver only ever
    # sees encrypted: refused with a 400, nothing stored.
    queue = make_queue({'_message_group_key': 'order',
                        '_enable_encrypt_messages': True})
    with pytest.raises(errors.InvalidInput,
                       match='_message_group_key.*_enable_encrypt_messages'):
        post(driver, queue, project, base64.b64encode(b'x'))
    assert listed(driver, queue, project) == []
    # Stored here without our stage, which refuses it at PUT and PATCH
    # (test_queue_stage.py): a claim is refused too.
    with pytest.raises(errors.InvalidInput,
                       match='_message_group_key.*_enable_encrypt_messages'):
        claim(driver, queue, project)

