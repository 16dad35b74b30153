"""Swift: a renewal extends only what its claim holds."""

import uuid

import pytest
from zaqar.storage import errors as storage_errors

from tests.contract.helpers import bodies, claim, post
from zaqar_delay.drivers.swift import names


def test_a_renewal_never_keeps_alive_a_message_its_claim_lost(
        driver, make_queue, project, clock):
    """The claim record names every message a lock was proposed for,
    before the locks are won; a renewal extended them all, so a message
    a rival won (here: whose claim ended since) outlived its ttl under no
    claim. The record keeps only what the claim won."""
    queue = make_queue()
    raced = post(driver, queue, project, 'raced', ttl=60)[0]
    post(driver, queue, project, 'ours', ttl=600)
    qs = driver.queue_state(queue, project)
    # A rival won attempt 1 of 'raced' just before this claim proposed
    # its lock (its a/ filing not yet deleted).
    driver.store.create(qs.c, names.lock_obj(raced, 1),
                        content_type=names.content_type(
                            c=str(uuid.uuid4())))
    claim_id, got = claim(driver, queue, project, ttl=60)
    assert bodies(got) == ['ours']
    # Its expiry hint, which retention's cut reads, names no more.
    [hint] = driver.store.listing(qs.c, 'x/')
    assert list(names.hint_members(hint)) == [got[0]['id']]
    driver.claim_controller.update(queue, claim_id, {'ttl': 3000},
                                   project=project)
    clock.advance(61)
    with pytest.raises(storage_errors.MessageDoesNotExist):
        driver.message_controller.get(queue, raced, project=project)
