"""Checks of a backend's queue metadata copies (zaqar_delay/metadata_copy.py)
shared by the Redis and MongoDB tests: ``other`` is a second API node
(its own driver and control driver) on the same stores as ``driver``."""

import pytest
from zaqar.storage import errors as storage_errors

from tests.contract.helpers import claim, listed, post


def a_metadata_change_applies_to_the_next_call_on_every_node(
        driver, other, project):
    driver.queue_controller.create('q', project=project)
    post(other, 'q', project, 'a')   # the other node copies {} now
    listed(other, 'q', project)      # and keeps it, where it can
    driver.queue_controller.set_metadata(
        'q', {'_default_message_delay': 600}, project=project)
    post(other, 'q', project, 'b')
    assert [m['body'] for m in listed(other, 'q', project)] == ['a']
    driver.queue_controller.set_metadata('q', {'_message_group_key': 'g'},
                                         project=project)
    assert other.message_controller.policy('q', project).group_key == 'g'


def a_queue_deleted_on_one_node_is_gone_on_the_next_call_of_another(
        driver, other, project):
    driver.queue_controller.create('q', project=project)
    post(other, 'q', project, 'a')
    listed(other, 'q', project)
    driver.queue_controller.delete('q', project=project)
    with pytest.raises(storage_errors.QueueDoesNotExist):
        post(other, 'q', project, 'b')
    assert claim(other, 'q', project) == (None, [])


def a_stale_cached_policy_is_read_again(writer, reader, project):
    """``reader`` caches the queue's policy, ``writer`` (another node)
    sets a delay: ``reader``'s next post finds its copy stale, stores
    nothing, and runs again with the delay."""
    writer.queue_controller.create('q', project=project)
    post(reader, 'q', project, 'fills the copy')
    listed(reader, 'q', project)      # and caches it
    writer.queue_controller.set_metadata(
        'q', {'_default_message_delay': 600}, project=project)
    post(reader, 'q', project, 'delayed')
    assert [m['body'] for m in listed(reader, 'q', project)] == [
        'fills the copy']
    assert [m['body'] for m in listed(reader, 'q', project,
                                      include_delayed=True)] == [
        'fills the copy', 'delayed']
