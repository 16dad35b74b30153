"""The queue stage every driver registers: metadata checks, stats and
queue deletion."""

import pytest
from zaqar.common import pipeline as common
from zaqar.storage import errors as storage_errors

from tests.contract.helpers import claim, listed, post
from zaqar_delay import errors
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


def through_pipeline(driver):
    """The queue controller as Zaqar builds it: our stage, then Zaqar's."""
    return common.Pipeline([stages.QueueStage(driver, driver.control_driver),
                            driver.queue_controller])


def test_metadata_read_through_the_pipeline_is_exact(driver, project):
    # Where the driver keeps copies, the stage answers from them (Zaqar's
    # transport reads the metadata before every post); elsewhere Zaqar's
    # queue controller does. Either way: exact, and the caller's own.
    queues = through_pipeline(driver)
    with pytest.raises(storage_errors.QueueDoesNotExist):
        queues.get_metadata('missing', project=project)
    queues.create('q', metadata={'_default_message_delay': 5},
                  project=project)
    post(driver, 'q', project, 'a')   # a copy, where the driver keeps one
    got = queues.get_metadata('q', project=project)
    assert got == {'_default_message_delay': 5}
    got['_default_message_delay'] = 900
    assert queues.get_metadata('q', project=project) == {
        '_default_message_delay': 5}
    queues.set_metadata('q', {'_max_claim_count': 3}, project=project)
    assert queues.get_metadata('q', project=project) == {
        '_max_claim_count': 3}
    queues.delete('q', project=project)
    with pytest.raises(storage_errors.QueueDoesNotExist):
        queues.get_metadata('q', project=project)


def test_topic_metadata_is_never_read_from_the_queue_copies(driver):
    # A topic's metadata is Zaqar's topic controller's alone.
    assert not hasattr(stages.TopicStage(driver, driver.control_driver),
                       'get_metadata')


# 'dlq\n': a regular expression's $ also matches before a final newline.
BAD_DEAD_LETTER_QUEUES = ['has space', 'slash/y', 'x' * 65, '', 7,
                          '\u2603', 'dlq\n']


def test_a_dead_letter_queue_name_of_64_characters_is_accepted(driver,
                                                                project):
    # The bound itself: 'x' * 65 is refused above.
    queues = through_pipeline(driver)
    name = 'd' * 64
    queues.create('q', metadata={'_dead_letter_queue': name,
                                 '_max_claim_count': 1}, project=project)
    assert queues.get_metadata('q', project=project)[
        '_dead_letter_queue'] == name


@pytest.mark.parametrize('dlq', BAD_DEAD_LETTER_QUEUES + ['SELF'])
def test_creating_a_queue_refuses_a_bad_dead_letter_queue(driver, project,
                                                          dlq):
    queues = through_pipeline(driver)
    dlq = 'q-self' if dlq == 'SELF' else dlq
    with pytest.raises(errors.RefusedQueueAttributes,
                       match='_dead_letter_queue') as raised:
        queues.create('q-self', metadata={'_dead_letter_queue': dlq},
                      project=project)
    assert repr(dlq) in str(raised.value)
    # Zaqar's PUT answers this error class (and only it) with 400.
    assert isinstance(raised.value, storage_errors.FlavorDoesNotExist)
    assert not driver.queue_controller.exists('q-self', project=project)


@pytest.mark.parametrize('dlq', BAD_DEAD_LETTER_QUEUES + ['SELF'])
def test_setting_metadata_refuses_a_bad_dead_letter_queue(driver, project,
                                                          dlq):
    queues = through_pipeline(driver)
    queues.create('q-self', metadata={'_max_claim_count': 2},
                  project=project)
    dlq = 'q-self' if dlq == 'SELF' else dlq
    with pytest.raises(errors.InvalidInput, match='_dead_letter_queue'):
        queues.set_metadata('q-self', {'_dead_letter_queue': dlq},
                            project=project)
    assert queues.get_metadata('q-self', project=project) == {
        '_max_claim_count': 2}


def test_the_stage_refuses_what_post_would_refuse(driver, project):
    queues = through_pipeline(driver)
    with pytest.raises(errors.InvalidInput, match='_message_group_key'):
        queues.create('q', metadata={'_message_group_key': 5},
                      project=project)
    queues.create('q', metadata={'_dead_letter_queue': 'other.dlq-1_x',
                                 '_message_group_key': 'k'}, project=project)
    queues.set_metadata('q', {'_default_message_delay': 5}, project=project)
    assert queues.get_metadata('q', project=project) == {
        '_default_message_delay': 5}


@pytest.mark.parametrize('metadata, shown', [
    ({'_redelivery_delay': 1000}, ['_redelivery_delay', 'got 1000', '900']),
    ({'_redelivery_delay': True}, ['_redelivery_delay', 'got True', '900']),
    ({'_max_claim_count': 0}, ['_max_claim_count', 'got 0']),
    ({'_default_message_delay': 901},
     ['_default_message_delay', 'got 901', '900']),
    ({'_default_message_delay': False},
     ['_default_message_delay', 'got False', '900']),
    ({'_message_group_key': 'k', '_enable_encrypt_messages': True},
     ['_enable_encrypt_messages']),
])
def test_the_stage_refuses_each_bad_attribute_when_set(driver, project,
                                                       metadata, shown):
    # Refused at PUT and PATCH, naming the attribute and, for a number,
    # the value and the bound, so a queue cannot be left in a state where
    # every later post and claim answers 400 (max_message_delay is 900).
    queues = through_pipeline(driver)
    with pytest.raises(errors.InvalidInput) as raised:
        queues.create('q', metadata=metadata, project=project)
    assert all(part in str(raised.value) for part in shown), raised.value
    assert not queues.exists('q', project=project)
    queues.create('q', metadata={}, project=project)
    with pytest.raises(errors.InvalidInput) as raised:
        queues.set_metadata('q', metadata, project=project)
    assert all(part in str(raised.value) for part in shown), raised.value
    assert queues.get_metadata('q', project=project) == {}


def test_a_queue_that_dead_letters_to_itself_loses_nothing(
        driver, make_queue, project, clock):
    """Metadata stored before it was checked is refused when used."""
    queue = make_queue({'_max_claim_count': 1})
    post(driver, queue, project, 'poison')
    claim(driver, queue, project, ttl=60)
    clock.advance(60)
    driver.queue_controller.set_metadata(
        queue, {'_max_claim_count': 1, '_dead_letter_queue': queue},
        project=project)
    for _ in range(2):
        with pytest.raises(errors.InvalidInput, match='_dead_letter_queue'):
            claim(driver, queue, project)
        with pytest.raises(errors.InvalidInput, match='_dead_letter_queue'):
            driver.message_controller.pop(queue, 1, project=project)
    assert [m['body'] for m in listed(driver, queue, project,
                                      include_claimed=True)] == ['poison']


def test_a_dead_letter_reaches_a_target_with_bad_metadata(
        driver, make_queue, project, clock):
    dlq = make_queue()
    driver.queue_controller.set_metadata(
        dlq, {'_message_group_key': 5}, project=project)
    queue = make_queue({'_max_claim_count': 1, '_dead_letter_queue': dlq})
    post(driver, queue, project, {'k': 'v'})
    claim(driver, queue, project, ttl=60)
    clock.advance(60)
    assert claim(driver, queue, project) == (None, [])
    driver.gc()
    assert [m['body'] for m in listed(driver, dlq, project)] == [{'k': 'v'}]
    assert listed(driver, queue, project, include_claimed=True) == []
    # docs/usage.md: claims there are refused until that metadata is
    # fixed, and nothing is taken meanwhile.
    with pytest.raises(errors.InvalidInput, match='_message_group_key'):
        claim(driver, dlq, project)
    driver.queue_controller.set_metadata(dlq, {}, project=project)
    assert [m['body'] for m in claim(driver, dlq, project)[1]] == [
        {'k': 'v'}]


def test_a_post_on_a_queue_with_a_bad_stored_dead_letter_queue_is_refused(
        driver, make_queue, project):
    """Metadata stored before it was checked: a post is refused, naming
    the attribute, as a claim and a pop are, and stores nothing."""
    queue = make_queue()
    driver.queue_controller.set_metadata(
        queue, {'_max_claim_count': 1, '_dead_letter_queue': 'bad name!'},
        project=project)
    with pytest.raises(errors.InvalidInput, match='_dead_letter_queue'):
        post(driver, queue, project, 'x')
    assert listed(driver, queue, project, include_claimed=True) == []


def test_a_count_is_not_called_seconds(driver, project):
    queues = through_pipeline(driver)
    with pytest.raises(errors.InvalidInput) as refused:
        queues.create('q', metadata={'_max_claim_count': 0}, project=project)
    assert str(refused.value) == (
        '_max_claim_count must be an integer from 1 to 2147483648; got 0')
