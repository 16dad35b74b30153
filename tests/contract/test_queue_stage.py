"""The queue stage every driver registers: stats and queue deletion."""

import pytest
from zaqar.storage import errors as storage_errors

from tests.contract.helpers import claim, listed, post
from zaqar_delay import stages


def test_stats_through_the_stage(driver, make_queue, project):
    stage = stages.QueueStage(driver, driver.control_driver)
    queue = make_queue({'_default_message_delay': 30})
    post(driver, queue, project, 'd')
    post(driver, queue, project, 'a', 'b', delay=0)
    claim(driver, queue, project, limit=1)
    counts = stage.stats(queue, project)['messages']
    assert {k: counts[k] for k in ('total', 'claimed', 'free', 'delayed')} \
        == {'total': 3, 'claimed': 1, 'free': 1, 'delayed': 1}
    assert counts['oldest']['id'] and counts['newest']['created']
    with pytest.raises(storage_errors.QueueDoesNotExist):
        stage.stats('missing', project)


def test_deleting_a_queue_removes_its_messages_and_claims(
        driver, make_queue, project):
    stage = stages.QueueStage(driver, driver.control_driver)
    queue = make_queue()
    post(driver, queue, project, *range(30))
    claim(driver, queue, project, limit=5)
    stage.delete(queue, project)
    driver.queue_controller.create(queue, project=project)
    assert listed(driver, queue, project, include_claimed=True) == []
    assert claim(driver, queue, project) == (None, [])
