"""zaqar-delay-migrate from Zaqar's own MongoDB store (on mongomock, as
every MongoDB test here) into each of our drivers: ids (Zaqar's ObjectId
hex), bodies, ttl and delay kept; --delete-source empties the source."""

import time
import uuid

import pytest

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
    code, out = migrate('--project-id', project, '--source-uri', SOURCE_URI,
                        '--delete-source')
    assert code == 0, out
    assert '2 messages (0 expired, skipped), 0 subscriptions, 2 verified, ' \
        '0 differences, 2 deleted from the source' in out
    moved = listed(ours, 'q', project, include_delayed=True)
    assert [(m['id'], m['body'], m['ttl']) for m in moved] == [
        (ids[0], {'n': 1}, 300), (ids[1], 'late', 600)]
    # Aged by the time the test took (a loaded machine takes seconds),
    # not reset to 0 by the move.
    spent = time.monotonic() - posted_at
    assert all(m['age'] <= spent + 1 for m in moved)
    assert [m['body'] for m in listed(ours, 'q', project)] == [{'n': 1}]
    assert list(source.bulk_get('q', ids, project=project)) == []
