"""zaqar-delay-migrate from Zaqar's own Swift store (its driver classes on
the session's real Swift, through tempauth) into each of our drivers:
ids, bodies, age (from the uuid1 id, which a claim does not rewrite),
remaining ttl and delay kept, oldest first; claims released;
subscriptions carried; expired messages counted, not moved;
--delete-source; a run killed midway and run again moves the rest once."""

import time
import uuid

import pytest

from localstack import backends
from tests.contract.helpers import listed
from localstack.factories import swift as swift_factory
from tests.migrate.conftest import FOUR_MOVED
from tests.migrate.conftest import killed_and_run_again
from tests.migrate.conftest import migrate_command
from tests.migrate.conftest import moved_queue
from tests.migrate.conftest import posted_ago
from tests.migrate.conftest import zaqar_listed
from tests.migrate.conftest import zaqar_post
from zaqar_delay.migrate import swift_source


@pytest.fixture
def swift_uri(swift_server):
    """Zaqar's ``swift://`` URI for the test Swift's tempauth account."""
    return swift_factory.swift_uri(swift_server).replace(
        'delay.swift://', 'swift://', 1)


@pytest.fixture
def zaqar_swift(swift_uri, control):
    conf = backends.make_conf(**{'drivers:message_store:swift': {
        'uri': swift_uri}})
    return swift_source.TempauthDataDriver(conf, None, control)


@pytest.fixture
def from_swift(migrate, swift_uri):
    return lambda *argv: migrate('--source-uri', swift_uri, *argv)


def remaining_ttl(zaqar_swift, queue, project, message_id):
    """Seconds until Swift expires the source's object."""
    headers = zaqar_swift.connection.head_object(
        'zaqar_message:{}:{}'.format(queue, project), message_id)
    return int(headers['x-delete-at']) - time.time()


def test_messages_keep_id_body_age_ttl_and_delay(zaqar_swift, ours, control,
                                                  from_swift, project):
    test_start = time.monotonic()
    control.queue_controller.create('q', project=project)
    old = zaqar_post(zaqar_swift, 'q', project, ['a', {'b': [1, 2]}],
                     ttl=600, ago=200)
    fresh = zaqar_post(zaqar_swift, 'q', project, ['fresh'])
    # A live claim: Zaqar rewrites the claimed object. (Before 'late' is
    # posted: on a queue without a default delay, Zaqar's Swift claims
    # delayed messages too.)
    _, handed = zaqar_swift.claim_controller.create(
        'q', {'ttl': 60, 'grace': 30}, project=project, limit=1)
    assert len(handed) == 1
    late = zaqar_post(zaqar_swift, 'q', project, ['late'], delay=120,
                      ago=20)
    left = {mid: remaining_ttl(zaqar_swift, 'q', project, mid)
            for mid in old + late + fresh}

    after = moved_queue(from_swift, ours, project, FOUR_MOVED)
    spent = time.monotonic() - test_start
    # Oldest first, though Zaqar's Swift lists by name.
    assert [m['id'] for m in after] == old + late + fresh
    assert [m['body'] for m in after] == ['a', {'b': [1, 2]}, 'late',
                                          'fresh']
    ages = [m['age'] for m in after]
    assert 200 - 1 <= ages[0] <= 200 + spent + 1
    assert 20 - 1 <= ages[2] <= 20 + spent + 1
    for message in after:
        assert -spent - 2 <= message['ttl'] - message['age'] - \
            left[message['id']] <= 2
        assert message['claim_id'] is None
    # 'late' is due in about 100 s: delayed in the target.
    assert [m['body'] for m in listed(ours, 'q', project)] == [
        'a', {'b': [1, 2]}, 'fresh']
    assert ours.message_controller.stats('q', project)['messages'][
        'delayed'] == 1
    # The source is left as it was.
    assert len(zaqar_listed(zaqar_swift, 'q', project, list(left))) == 4


def test_subscriptions_expired_messages_and_delete_source(
        zaqar_swift, ours, control, from_swift, project):
    control.queue_controller.create('q', project=project)
    subs = zaqar_swift.subscription_controller
    sub_id = posted_ago(0, lambda: subs.create(
        'q', 'http://example.com/hook', 3600, {'k': 'v'}, project=project))
    subs.confirm('q', sub_id, project=project, confirmed=True)
    ids = zaqar_post(zaqar_swift, 'q', project, ['x', 'y'])
    zaqar_post(zaqar_swift, 'q', project, ['gone'], ttl=1)
    # Swift hides an object once its X-Delete-At (whole seconds) passed.
    time.sleep(2.1)

    code, out = from_swift('--project-id', project, '--dry-run')
    assert code == 0, out
    assert '2 messages (1 expired, skipped), 1 subscriptions' in out
    assert listed(ours, 'q', project) == []

    code, out = from_swift('--project-id', project, '--delete-source')
    assert code == 0, out
    assert '2 messages (1 expired, skipped), 1 subscriptions, 2 verified, ' \
        '0 differences, 2 deleted from the source' in out
    assert [m['id'] for m in listed(ours, 'q', project)] == ids
    assert zaqar_listed(zaqar_swift, 'q', project, ids) == []
    # --delete-source deletes messages only: the subscription stays.
    assert [sub['id'] for sub in next(subs.list('q', project=project))] \
        == [sub_id]
    [sub] = list(next(ours.subscription_controller.list('q',
                                                        project=project)))
    assert (sub['subscriber'], sub['options'], sub['confirmed']) == (
        'http://example.com/hook', {'k': 'v'}, True)
    assert 3600 - 30 <= sub['ttl'] - sub['age'] <= 3600


# Into Redis only: what a rerun skips is the target's carry_in, killed
# and rerun per target in test_redis_source.py; this one is about the
# Swift source's paging.
@pytest.mark.parametrize('target_name', ['redis'], indirect=True)
def test_a_killed_run_run_again_moves_the_rest_once(
        zaqar_swift, ours, control, config, swift_uri, project,
        target_name):
    control.queue_controller.create('q', project=project)
    ids = zaqar_post(zaqar_swift, 'q', project, range(30))
    command = migrate_command(config, swift_uri, project, batch=3)
    after = killed_and_run_again(ours, command, project, ids, batch=3,
                                 moved_batches=3)
    assert [m['body'] for m in after] == list(range(30))


def test_names_sort_by_their_whole_uuid1_time():
    """Two uuid1 names made in one ms, the later one's low 32 bits of
    time wrapped (its text sorts first): posting order is their time."""
    # 300 ticks (30 us) below a wrap of the low 32 bits, early enough in
    # its millisecond (10,000 ticks) that 600 ticks later is still in it.
    tick = (0x01B21DD213814000 + 1_700_000_000_000 * 10_000) \
        | 0xFFFFFFFF
    tick -= 299
    while tick % 10_000 > 9_000:
        tick += 1 << 32

    def uuid1_at(ticks):
        return str(uuid.UUID(fields=(
            ticks & 0xFFFFFFFF, (ticks >> 32) & 0xFFFF,
            ((ticks >> 48) & 0x0FFF) | 0x1000, 0x80, 0x00, 0x1234),
            version=1))

    earlier, later = uuid1_at(tick), uuid1_at(tick + 600)
    assert (tick + 600) & 0xFFFFFFFF < tick & 0xFFFFFFFF
    assert swift_source.created_ms_of(earlier) == \
        swift_source.created_ms_of(later)
    assert later < earlier, 'the wrap puts the later name first as text'
    listed_names = [later, 'not-a-uuid', earlier]
    assert sorted(listed_names, key=swift_source._posting_order) == [
        earlier, later, 'not-a-uuid']
