"""MongoDB: a pop whose delete loses its reply still returns its batch;
one whose claim step loses it loses no message.

pymongo retries single-document writes itself (exactly once, by the
server's retryable writes); a pop's delete is a multi-document write, so
the driver sends it again and returns the batch it holds.
"""

import pytest

from tests.contract.helpers import listed, post
from zaqar_delay import errors
from zaqar_delay.drivers.mongodb import claims


def test_a_pop_whose_delete_reply_is_lost_returns_its_batch(
        driver, project, monkeypatch):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a', 'b', 'c')
    original = driver.messages.delete_many
    lost = []

    def delete_many(*args, **kwargs):
        result = original(*args, **kwargs)
        if not lost:
            lost.append(True)
            raise errors.BackendUnavailable(backend='MongoDB',
                                            reason='reply lost')
        return result

    monkeypatch.setattr(driver.messages, 'delete_many', delete_many)
    popped = driver.message_controller.pop('q', 2, project=project)
    assert [m['body'] for m in popped] == ['a', 'b']
    assert [m['body'] for m in listed(driver, 'q', project,
                                      include_claimed=True)] == ['c']


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
