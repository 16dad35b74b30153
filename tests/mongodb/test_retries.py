"""MongoDB: a pop whose delete loses its reply still returns its batch.

pymongo retries single-document writes itself (exactly once, by the
server's retryable writes); a pop's delete is a multi-document write, so
the driver sends it again and returns the batch it holds.
"""

from tests.contract.helpers import listed, post
from zaqar_delay import errors


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
