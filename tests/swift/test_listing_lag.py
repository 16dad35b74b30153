"""Swift: container listings that lag behind a write, on a real Swift.

When the container server does not take an object server's update in
time (a loaded node), the write succeeds but its listing row waits in
``async_pending`` for Swift's object-updater. ``drop_listing_row`` puts a
queue in that state for one object: the object exists, the listing does
not show it, and the updater will not bring the row back. Decisions that
lose or strand messages must not rest on such a row.
"""

import pytest

from tests.contract.helpers import bodies, claim, post
from zaqar_delay.drivers.swift import names

GROUPED = {'_message_group_key': 'g'}
CASES = {'plain': ({}, ['a', 'b']),
         'grouped': (GROUPED, [{'g': 'x', 'n': 1}, {'g': 'x', 'n': 2}])}


def container(queue, project):
    return names.container(names.MESSAGES, queue, project)


def object_names(driver, queue, project, prefix):
    return [e['name'] for e in driver.store.listing_all(
        container(queue, project), prefix)]


@pytest.mark.parametrize('kind', sorted(CASES))
def test_a_claimed_message_whose_lock_is_unlisted_is_redelivered(
        driver, swift_server, make_queue, project, clock, kind):
    metadata, posted = CASES[kind]
    queue = make_queue(metadata)
    first_id = post(driver, queue, project, *posted, ttl=3600)[0]
    claim_id, got = claim(driver, queue, project, limit=1)
    assert bodies(got) == posted[:1]
    lock = names.lock_obj(first_id, 1)
    swift_server.drop_listing_row(container(queue, project), lock)
    assert object_names(driver, queue, project, 'l/') == []
    # The claim (ttl 600 + grace 30) ends; its expiry must still see the
    # lock and give the message back, before anything behind it.
    clock.advance(700)
    again = claim(driver, queue, project, limit=1)[1]
    assert bodies(again) == posted[:1]
    assert again[0]['claim_count'] == 2


@pytest.mark.parametrize('kind', sorted(CASES))
def test_gc_keeps_a_message_whose_filing_is_unlisted(
        driver, swift_server, make_queue, project, clock, kind):
    metadata, posted = CASES[kind]
    queue = make_queue(metadata)
    message_id = post(driver, queue, project, posted[0], ttl=3600)[0]
    filing = object_names(driver, queue, project,
                          'g/' if metadata else 'a/')
    assert len(filing) == 1
    swift_server.drop_listing_row(container(queue, project), filing[0])
    # Long past the age at which gc takes an unfiled message for a post
    # that died midway (a draft).
    clock.advance(600)
    driver._gc_queue(container(queue, project))
    assert object_names(driver, queue, project, 'm/') == [
        names.message_obj(message_id)]
    assert bodies([driver.message_controller.get(
        queue, message_id, project=project)]) == posted[:1]
