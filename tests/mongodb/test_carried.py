"""MongoDB: a move run again skips what it carried in before, even once a
consumer deleted it here (drivers/mongodb/carried.py, docs/migration.md).
The whole command is tested in tests/migrate (test_redis_source.py,
``test_delete_source_deletes_only_what_the_target_holds``)."""

import pytest

from tests.contract.helpers import bodies, claim, listed, moved
from tests.mongodb.test_given_up import last_position
from zaqar_delay import errors
from zaqar_delay.drivers.mongodb import carried
from zaqar_delay.drivers.mongodb import clock as store_clock
from zaqar_delay.drivers.mongodb import fields


def records(driver, project):
    return {doc['_id']: doc for doc in driver.carried.raw.find(
        {fields.PROJECT: project})}


def test_what_a_consumer_deleted_is_not_carried_in_again(
        driver, make_queue, project):
    queue = make_queue()
    messages = moved(driver, queue, project, 'acked', 'popped', 'claimed',
                     'kept')
    controller = driver.message_controller
    controller.carry_in(queue, project, messages, 'c')
    controller.delete(queue, messages[0].id, project=project)
    assert bodies(controller.pop(queue, 1, project=project)) == ['popped']
    claim_id, [taken] = claim(driver, queue, project, limit=1)
    controller.delete(queue, taken['id'], project=project,
                      claim=claim_id)
    taken_so_far = last_position(driver, queue, project)
    controller.carry_in(queue, project, messages, 'c')
    assert bodies(listed(driver, queue, project)) == ['kept']
    assert last_position(driver, queue, project) == taken_so_far


def test_a_run_stopped_before_its_records_stores_nothing_twice(
        driver, make_queue, project, monkeypatch):
    # The records are written after the messages; a run that dies in
    # between (or messages carried in by a release without records) is
    # found among the messages by the next run, which records them.
    queue = make_queue()
    messages = moved(driver, queue, project, 'a', 'b')
    controller = driver.message_controller

    def died(*args):
        raise errors.BackendUnavailable(backend='MongoDB', reason='died')

    monkeypatch.setattr(carried, 'remember', died)
    with pytest.raises(errors.BackendUnavailable):
        controller.carry_in(queue, project, messages, 'c')
    monkeypatch.undo()
    assert records(driver, project) == {}
    taken = last_position(driver, queue, project)
    controller.carry_in(queue, project, messages, 'c')
    assert bodies(listed(driver, queue, project)) == ['a', 'b']
    assert last_position(driver, queue, project) == taken
    assert set(records(driver, project)) == {m.id for m in messages}
    controller.delete(queue, messages[0].id, project=project)
    controller.carry_in(queue, project, messages, 'c')
    assert bodies(listed(driver, queue, project)) == ['b']


def test_a_record_lasts_until_its_message_expired_in_the_source(
        driver, make_queue, project, clock):
    queue = make_queue()
    [message] = moved(driver, queue, project, 'a', ttl=300, age_ms=100000)
    driver.message_controller.carry_in(queue, project, [message], 'c')
    [record] = records(driver, project).values()
    # Its message expires 200 s from now, in the source as here.
    assert store_clock.epoch_ms(record[fields.CARRIED_UNTIL]) == (
        clock.now_ms + 200000 + fields.CARRIED_MARGIN_MS)
    ttl_index = driver.carried.raw.index_information()['zd_carried_ttl']
    assert ttl_index['key'] == [(fields.CARRIED_UNTIL, 1)]
    assert ttl_index['expireAfterSeconds'] == 0


def test_records_are_per_project(driver, make_queue, project):
    queue = make_queue()
    [message] = moved(driver, queue, project, 'a')
    controller = driver.message_controller
    controller.carry_in(queue, project, [message], 'c')
    controller.delete(queue, message.id, project=project)
    assert carried.before(driver, project, [message.id]) == {message.id}
    assert carried.before(driver, project + '-other', [message.id]) == set()
    # Another project's move of the same id is not skipped for it.
    other = project + '-other'
    driver.queue_controller.create(queue, project=other)
    controller.carry_in(queue, other, [message], 'c')
    assert bodies(listed(driver, queue, other)) == ['a']
    assert bodies(listed(driver, queue, project)) == []


def test_a_record_refused_for_another_reason_is_a_storage_error(
        driver, make_queue, project, monkeypatch):
    # A record another run wrote first is the same record; any other
    # refusal is a storage error, as every MongoDB fault, never pymongo's
    # own exception (which reaches Zaqar as a 500).
    from pymongo import errors as mongo_errors
    from zaqar.storage import errors as storage_errors
    queue = make_queue()

    def refuse(*args, **kwargs):
        raise mongo_errors.BulkWriteError({'writeErrors': [
            {'index': 0, 'code': 121, 'errmsg': 'validation failed'}]})

    monkeypatch.setattr(driver.carried, 'insert_many', refuse)
    with pytest.raises(storage_errors.ConnectionError):
        driver.message_controller.carry_in(
            queue, project, moved(driver, queue, project, 'a'), 'c')
