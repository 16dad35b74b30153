"""zaqar-delay-migrate from Zaqar's own MongoDB store (on mongomock, as
every MongoDB test here) into each of our drivers: ids (Zaqar's ObjectId
hex), bodies, ttl and delay kept; --delete-source empties the source."""

import datetime
import math
import time
import uuid

import bson
import pytest
from oslo_utils import timeutils

from localstack import backends
from tests.contract.helpers import listed
from localstack.factories import mongodb as mongodb_factory
from localstack import zaqar_server

CLIENT = uuid.UUID('11111111-1111-4111-8111-111111111111')
SOURCE_URI = 'mongodb://127.0.0.1:27017'


@pytest.fixture
def config(own_redis, target_store, tmp_path):
    # unreliable: Zaqar's MongoDB driver refuses a non-replica-set store.
    return zaqar_server.write_config(
        str(tmp_path), own_redis.url, 0, *target_store, unreliable=True,
        extra='[drivers:message_store:mongodb]\ndatabase = zaqar_migrate\n')


@pytest.fixture
def zaqar_mongodb(control, monkeypatch):
    """Zaqar's own MongoDB data driver, and the command's, on one
    mongomock."""
    from zaqar.storage.mongodb import driver
    client = mongodb_factory.StandaloneView(
        mongodb_factory.mongomock_client_factory()(None))
    monkeypatch.setattr(driver, '_connection', lambda conf: client)
    conf = backends.make_conf(**{
        'drivers:message_store:mongodb': {'uri': SOURCE_URI,
                                          'database': 'zaqar_migrate'}})
    conf.set_override('unreliable', True)
    return driver.DataDriver(conf, None, control)


def test_messages_move_from_zaqar_mongodb(zaqar_mongodb, ours, control,
                                          migrate, project):
    control.queue_controller.create('q', project=project)
    source = zaqar_mongodb.message_controller
    posted_at = time.monotonic()
    ids = source.post('q', [{'ttl': 300, 'body': {'n': 1}},
                            {'ttl': 600, 'delay': 120, 'body': 'late'}],
                      CLIENT, project=project)
    # The ttl counted from the message's creation as Zaqar's MongoDB
    # driver stores it: from the ObjectId's time (whole seconds, taken at
    # the insert) to the expiry (whole seconds, set before): a second
    # less than posted when the insert falls in the next second (two on
    # a machine slow enough to insert over a second late).
    ttls = {str(doc['_id']): math.ceil(
        doc['e'].replace(tzinfo=datetime.timezone.utc).timestamp()
        - doc['_id'].generation_time.timestamp())
        for doc in source._collection('q', project).find(
            {'_id': {'$in': [bson.ObjectId(mid) for mid in ids]}})}
    assert 298 <= ttls[ids[0]] <= 300 and 598 <= ttls[ids[1]] <= 600, ttls
    code, out = migrate('--project-id', project, '--source-uri', SOURCE_URI,
                        '--delete-source')
    assert code == 0, out
    assert '2 messages (0 expired, skipped), 0 subscriptions, 2 verified, ' \
        '0 differences, 2 deleted from the source' in out
    moved = listed(ours, 'q', project, include_delayed=True)
    assert [(m['id'], m['body'], m['ttl']) for m in moved] == [
        (ids[0], {'n': 1}, ttls[ids[0]]), (ids[1], 'late', ttls[ids[1]])]
    # Aged by the time the test took (a loaded machine takes seconds),
    # not reset to 0 by the move.
    spent = time.monotonic() - posted_at
    assert all(m['age'] <= spent + 1 for m in moved)
    assert [m['body'] for m in listed(ours, 'q', project)] == [{'n': 1}]
    assert list(source.bulk_get('q', ids, project=project)) == []


def test_claimed_messages_move_released_with_their_subscription_once(
        zaqar_mongodb, ours, control, migrate, project):
    control.queue_controller.create('q', project=project)
    source = zaqar_mongodb.message_controller
    ids = source.post('q', [{'ttl': 300, 'body': n} for n in range(3)],
                      CLIENT, project=project)
    _, held = zaqar_mongodb.claim_controller.create(
        'q', {'ttl': 60, 'grace': 30}, project=project, limit=1)
    assert [m['body'] for m in held] == [0]
    zaqar_mongodb.subscription_controller.create(
        'q', 'http://example.com/hook', 3600, {'k': 'v'}, project=project)
    for _ in range(2):      # run again: nothing is stored twice
        code, out = migrate('--project-id', project, '--source-uri',
                            SOURCE_URI)
        assert code == 0, out
        assert '3 messages (0 expired, skipped), 1 subscriptions, ' \
            '3 verified, 0 differences' in out
    moved = listed(ours, 'q', project, include_claimed=True)
    assert [(m['id'], m['body'], m['claim_id']) for m in moved] == [
        (ids[n], n, None) for n in range(3)]
    # Released: the claim held in the old store holds nothing here.
    _, claimed = ours.claim_controller.create(
        'q', {'ttl': 60, 'grace': 0}, project=project, limit=10)
    assert [m['body'] for m in claimed] == [0, 1, 2]
    [sub] = list(next(ours.subscription_controller.list('q',
                                                        project=project)))
    assert (sub['subscriber'], sub['options']) == (
        'http://example.com/hook', {'k': 'v'})


def test_a_run_that_fails_midway_run_again_moves_the_rest_once(
        zaqar_mongodb, ours, control, migrate, project, monkeypatch):
    # The command runs in this process (mongomock lives here), so the
    # failure is raised by the target's store after two batches of 10,
    # where a killed process would stop (test_redis_source.py kills one).
    control.queue_controller.create('q', project=project)
    ids = zaqar_mongodb.message_controller.post(
        'q', [{'ttl': 300, 'body': n} for n in range(30)], CLIENT,
        project=project)
    target_class = type(ours.message_controller)
    carry_in, calls = target_class.carry_in, []

    def failing_carry_in(self, *args, **kwargs):
        calls.append(1)
        if len(calls) > 2:
            raise RuntimeError('the target went away')
        return carry_in(self, *args, **kwargs)

    monkeypatch.setattr(target_class, 'carry_in', failing_carry_in)
    with pytest.raises(RuntimeError, match='went away'):
        migrate('--project-id', project, '--source-uri', SOURCE_URI,
                '--batch', '10')
    assert len(listed(ours, 'q', project)) == 20
    monkeypatch.setattr(target_class, 'carry_in', carry_in)
    code, out = migrate('--project-id', project, '--source-uri', SOURCE_URI,
                        '--batch', '10')
    assert code == 0, out
    assert [m['id'] for m in listed(ours, 'q', project)] == ids


def test_checksum_and_poster_are_kept(zaqar_mongodb, ours, control,
                                      migrate, project):
    """Zaqar stores the poster as BSON binary: the moved message must
    name the same client, so that its poster's own listing without echo
    still leaves it out."""
    control.queue_controller.create('q', project=project)
    zaqar_mongodb.conf.set_override('enable_checksum', True)
    try:
        [mid] = zaqar_mongodb.message_controller.post(
            'q', [{'ttl': 300, 'body': {'x': 1}}], CLIENT, project=project)
    finally:
        zaqar_mongodb.conf.clear_override('enable_checksum')
    source = zaqar_mongodb.message_controller.get('q', mid, project=project)
    assert source['checksum']
    assert migrate('--project-id', project, '--source-uri',
                   SOURCE_URI)[0] == 0
    [moved] = listed(ours, 'q', project)
    assert moved['checksum'] == source['checksum']
    assert listed(ours, 'q', project, echo=False, client_uuid=CLIENT) == []
    assert len(listed(ours, 'q', project, echo=False,
                      client_uuid=uuid.uuid4())) == 1


def test_an_old_message_keeps_its_age(zaqar_mongodb, ours, control,
                                      migrate, project):
    """Zaqar's MongoDB driver keeps a message's creation time only in its
    ObjectId: a message 100 s old (its document stored again under an id
    made 100 s ago) is 100 s old in the target, with the ttl it had left,
    not reset to 0 by the move."""
    control.queue_controller.create('q', project=project)
    source = zaqar_mongodb.message_controller
    [mid] = source.post('q', [{'ttl': 300, 'body': 'old'}], CLIENT,
                        project=project)
    collection = source._collection('q', project)
    doc = collection.find_one({'_id': bson.ObjectId(mid)})
    collection.delete_one({'_id': doc['_id']})
    made = datetime.datetime.now(datetime.timezone.utc) - \
        datetime.timedelta(seconds=100)
    doc['_id'] = bson.ObjectId.from_datetime(made)
    doc['e'] = made + datetime.timedelta(seconds=300)
    collection.insert_one(doc)
    started = time.monotonic()
    code, out = migrate('--project-id', project, '--source-uri', SOURCE_URI)
    assert code == 0, out
    [moved] = listed(ours, 'q', project)
    assert moved['id'] == str(doc['_id'])
    spent = time.monotonic() - started
    assert 99 <= moved['age'] <= 100 + spent + 1
    assert 200 - spent - 2 <= moved['ttl'] - moved['age'] <= 201


def _dead_lettered(zaqar_mongodb, queue, project):
    """Post one message to ``queue`` with Zaqar's MongoDB driver and let
    Zaqar's own claim path move it to ``dlq`` (max claim count 1: the
    second claim, after the first expired, dead-letters it). Its id."""
    zaqar_mongodb.queue_controller.create(queue, project=project, metadata={
        '_max_claim_count': 1, '_dead_letter_queue': 'dlq'})
    [mid] = zaqar_mongodb.message_controller.post(
        queue, [{'ttl': 3600, 'body': queue}], CLIENT, project=project)
    claims = zaqar_mongodb.claim_controller
    claims.create(queue, {'ttl': 60, 'grace': 0}, project=project, limit=1)
    timeutils.set_time_override(timeutils.utcnow() +
                                datetime.timedelta(seconds=120))
    try:
        claims.create(queue, {'ttl': 60, 'grace': 0}, project=project,
                      limit=1)
    finally:
        timeutils.clear_time_override()
    return mid


@pytest.mark.parametrize('target_name', ['redis'])
def test_dead_letters_of_two_queues_with_one_marker_both_move(
        zaqar_mongodb, ours, control, migrate, project):
    """Two queues dead-letter into one DLQ with Zaqar's MongoDB driver,
    which moves a message by rewriting its queue and keeps its marker
    ``k`` (each queue's counter starts at the same value): the DLQ holds
    two messages with the same k. Paged by ``k > marker``, the second
    was skipped: neither moved nor reported ("2 messages in the source",
    then "1 messages ... 0 differences", status 0)."""
    source = zaqar_mongodb.message_controller
    same = ['q1', 'q2']
    # (The driver's queue controller is the management store's.)
    control.queue_controller.create('dlq', project=project)
    dead = {_dead_lettered(zaqar_mongodb, name, project) for name in same}
    assert {m['id'] for m in source.bulk_get('dlq', list(dead),
                                             project=project)} == dead
    _, out = migrate('--project-id', project, '--source-uri', SOURCE_URI,
                     '--queue', 'dlq', '--batch', '1')
    moved = {m['id'] for m in listed(ours, 'dlq', project,
                                     include_claimed=True,
                                     include_delayed=True)}
    assert moved == dead, out
