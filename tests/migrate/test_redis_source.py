"""zaqar-delay-migrate from Zaqar's own Redis store into ours: every
message keeps its id, body, age, remaining ttl and remaining delay; live
claims are released; subscriptions keep subscriber, options and remaining
ttl; a dry run changes nothing; --delete-source deletes only what the
target verifiably holds; a run killed midway and run again moves the rest
with no duplicate."""

import json
import time

import pytest
from zaqar.storage.redis import subscriptions as redis_subscriptions
from zaqar.storage.redis import utils as redis_utils

from tests.contract.helpers import listed
from tests.migrate.conftest import CLIENT
from tests.migrate.conftest import FOUR_MOVED
from tests.migrate.conftest import killed_and_run_again
from tests.migrate.conftest import migrate_command
from tests.migrate.conftest import moved_queue
from tests.migrate.conftest import posted_ago
from tests.migrate.conftest import skip_mongomock_in_a_subprocess
from tests.migrate.conftest import zaqar_listed
from tests.migrate.conftest import zaqar_post
from zaqar_delay.migrate import sources


def test_messages_keep_id_body_age_ttl_and_delay(zaqar_redis, ours,
                                                  control, migrate,
                                                  project):
    # Ages are compared across reads seconds apart (a Swift target is
    # slow): bounds allow the seconds between them, measured.
    test_start = time.monotonic()
    control.queue_controller.create('q', project=project,
                                    metadata={'_default_message_delay': 0})
    old = zaqar_post(zaqar_redis, 'q', project, ['a', {'b': [1, 2]}],
                     ttl=600, ago=200)
    late = zaqar_post(zaqar_redis, 'q', project, ['late'], delay=120,
                      ago=20)
    claimed = zaqar_post(zaqar_redis, 'q', project, ['held'])
    # A live claim on 'a' (the oldest due message).
    claim_id, handed = zaqar_redis.claim_controller.create(
        'q', {'ttl': 60, 'grace': 30}, project=project, limit=1)
    assert [m['body'] for m in handed] == ['a']
    read_start = time.monotonic()
    before = {m['id']: m for m in zaqar_listed(zaqar_redis, 'q', project,
                                                 old + late + claimed)}

    after = moved_queue(migrate, ours, project, FOUR_MOVED)
    between_reads = time.monotonic() - read_start
    assert [m['id'] for m in after] == old + late + claimed
    for message in after:
        source = before[message['id']]
        assert message['body'] == source['body']
        assert -1 <= message['age'] - source['age'] <= between_reads + 1
        # Zaqar grew the claimed message's ttl to the claim's + grace.
        assert message['ttl'] == source['ttl'] or message['id'] == old[0]
        # Released: a new claim can take it, and it counts from 0.
        assert message['claim_id'] is None
    assert after[0]['ttl'] >= 600 - 200
    # 'late' is due 100 s from now: not listed without include_delayed,
    # not claimable; the others are.
    assert [m['body'] for m in listed(ours, 'q', project)] == [
        'a', {'b': [1, 2]}, 'held']
    _, claimed_now = ours.claim_controller.create(
        'q', {'ttl': 60, 'grace': 0}, project=project, limit=10)
    assert [m['body'] for m in claimed_now] == ['a', {'b': [1, 2]}, 'held']
    stats = ours.message_controller.stats('q', project)['messages']
    assert stats['delayed'] == 1
    assert 200 - 1 <= stats['oldest']['age'] <= \
        200 + time.monotonic() - test_start + 1
    # The source is left as it was (no --delete-source).
    assert len(zaqar_listed(zaqar_redis, 'q', project, list(before))) == 4


def test_a_claimed_message_keeps_the_ttl_its_claim_grew(
        zaqar_redis, ours, control, migrate, project):
    """Zaqar grows a claimed message's ttl to the claim's ttl + grace when
    that outlives it: 30 s left, claimed for 60 + 30 s, it has some 90 s
    left, and keeps them in the target (released, not cut back to 30)."""
    control.queue_controller.create('q', project=project)
    [mid] = zaqar_post(zaqar_redis, 'q', project, ['short'], ttl=60,
                       ago=30)
    _, handed = zaqar_redis.claim_controller.create(
        'q', {'ttl': 60, 'grace': 30}, project=project, limit=1)
    assert [m['id'] for m in handed] == [mid]
    # What Zaqar stores: the expiry it grew (its API shows ttl 90 of a
    # message 30 s old, which ends 90 s from now all the same).
    expires = int(zaqar_redis.message_controller._client.hget(mid, 'e'))
    assert expires - time.time() >= 85, 'Zaqar grew it'
    started = time.monotonic()
    assert migrate('--project-id', project)[0] == 0
    [moved] = listed(ours, 'q', project)
    spent = time.monotonic() - started
    assert moved['claim_id'] is None
    assert 85 - spent <= moved['ttl'] - moved['age'] <= 91


def test_subscriptions_keep_subscriber_options_and_remaining_ttl(
        zaqar_redis, ours, control, migrate, project):
    test_start = time.monotonic()
    control.queue_controller.create('q', project=project)
    subs = zaqar_redis.subscription_controller
    sub_id = posted_ago(100, lambda: subs.create(
        'q', 'http://example.com/hook', 3600, {'k': 'v'}, project=project))
    subs.confirm('q', sub_id, project=project, confirmed=True)
    code, out = migrate('--project-id', project)
    assert code == 0, out
    [sub] = list(next(ours.subscription_controller.list('q',
                                                        project=project)))
    assert (sub['subscriber'], sub['options']) == ('http://example.com/hook',
                                                   {'k': 'v'})
    assert sub['confirmed'] is True
    spent = time.monotonic() - test_start
    assert 3600 - 100 - spent - 2 <= sub['ttl'] - sub['age'] <= 3600 - 100
    # Run again: still one.
    assert migrate('--project-id', project)[0] == 0
    assert len(list(next(ours.subscription_controller.list(
        'q', project=project)))) == 1


def test_a_dry_run_counts_and_changes_nothing(zaqar_redis, ours, control,
                                              migrate, project):
    control.queue_controller.create('q', project=project)
    ids = zaqar_post(zaqar_redis, 'q', project, range(5))
    zaqar_post(zaqar_redis, 'q', project, ['gone'], ttl=60, ago=61)
    code, out = migrate('--project-id', project, '--dry-run')
    assert code == 0, out
    assert '5 messages (1 expired, skipped)' in out
    assert listed(ours, 'q', project, include_claimed=True,
                  include_delayed=True) == []
    assert [m['id'] for m in zaqar_listed(zaqar_redis, 'q', project,
                                          ids)] == ids


# The step size is the command's, whatever the target: one is enough.
@pytest.mark.parametrize('target_name', ['redis'])
def test_a_move_steps_a_hundred_messages_at_a_time_by_default(
        zaqar_redis, ours, control, migrate, project):
    control.queue_controller.create('q', project=project)
    zaqar_post(zaqar_redis, 'q', project, range(150))
    code, out = migrate('--project-id', project)
    assert code == 0, out
    steps = [line.split(' messages')[0] for line in out.splitlines()
             if line.startswith(('moved:', 'verified:'))]
    assert steps == ['moved: 100 / 300', 'moved: 150 / 300',
                     'verified: 250 / 300', 'verified: 300 / 300']


def test_filters_pick_projects_and_queues(zaqar_redis, ours, control,
                                          migrate, project):
    other = project + '-other'
    for name in ('q1', 'q2'):
        for owner in (project, other):
            control.queue_controller.create(name, project=owner)
            zaqar_post(zaqar_redis, name, owner, [name + owner])
    code, out = migrate('--project-id', project, '--queue', 'q2')
    assert code == 0, out
    moved = {(owner, name): [m['body'] for m in listed(ours, name, owner)]
             for owner in (project, other) for name in ('q1', 'q2')}
    assert moved == {(project, 'q1'): [], (project, 'q2'): ['q2' + project],
                     (other, 'q1'): [], (other, 'q2'): []}
    # Without --project: every project of the management store.
    code, out = migrate('--queue', 'q1')
    assert code == 0, out
    assert [m['body'] for m in listed(ours, 'q1', other)] == ['q1' + other]


def test_filters_are_repeatable(zaqar_redis, ours, control, migrate,
                                project):
    """--project-id and --queue, each given twice: every pair of them,
    nothing else."""
    projects = [project + '-a', project + '-b', project + '-c']
    for owner in projects:
        for name in ('q1', 'q2', 'q3'):
            control.queue_controller.create(name, project=owner)
            zaqar_post(zaqar_redis, name, owner, [name + owner])
    code, out = migrate('--project-id', projects[0], '--project-id',
                        projects[2], '--queue', 'q1', '--queue', 'q3')
    assert code == 0, out
    moved = {(owner, name) for owner in projects
             for name in ('q1', 'q2', 'q3')
             if listed(ours, name, owner)}
    assert moved == {(owner, name) for owner in (projects[0], projects[2])
                     for name in ('q1', 'q3')}


def test_a_queue_name_that_matches_nothing_is_refused(zaqar_redis, ours,
                                                     control, migrate,
                                                     project):
    """Tried: --queue q1 --queue qq2 (a typo of q2). It printed "0
    queues" for qq2's part and exited 0: a typo looked like a move that
    went well. Refused now, naming it, and q1 does not move either."""
    for name in ('q1', 'q2'):
        control.queue_controller.create(name, project=project)
        zaqar_post(zaqar_redis, name, project, [name])
    with pytest.raises(SystemExit) as refused:
        migrate('--project-id', project, '--queue', 'q1', '--queue', 'qq2')
    assert str(refused.value) == ('--queue names no queue of the selected '
                                  'projects: qq2; nothing moved')
    assert listed(ours, 'q1', project) == []


def carry_in_altered(ours, monkeypatch, alter):
    """The target's carry_in stores each message as ``alter`` returns it
    (None: not at all), as a target that kept it wrongly would."""
    target_class = type(ours.message_controller)
    carry_in = target_class.carry_in

    def altered(self, queue, project, messages, client_uuid):
        kept = [alter(m) for m in messages]
        carry_in(self, queue, project, [m for m in kept if m is not None],
                 client_uuid)

    monkeypatch.setattr(target_class, 'carry_in', altered)


def test_delete_source_deletes_only_what_the_target_holds(
        zaqar_redis, ours, control, migrate, project, monkeypatch):
    control.queue_controller.create('q', project=project)
    ids = zaqar_post(zaqar_redis, 'q', project, ['a', 'b', 'c'])
    # A target that never took 'c'.
    carry_in_altered(ours, monkeypatch,
                     lambda m: None if m.id == ids[2] else m)
    assert migrate('--project-id', project)[0] == 1
    # A consumer of the target deleted 'b' meanwhile: the next move does
    # not bring it back, and verifies it as consumed there
    # (docs/migration.md, step 6: run again once clients used the new
    # store); 'c', missing and never carried in, is a difference and
    # stays in the source.
    ours.message_controller.delete('q', ids[1], project=project)
    code, out = migrate('--project-id', project, '--delete-source')
    assert code == 1, out
    assert 'message {}: missing in the target'.format(ids[2]) in out
    assert '2 verified (1 consumed in the target), 1 differences, ' \
        '2 deleted from the source' in out
    assert [m['id'] for m in zaqar_listed(zaqar_redis, 'q', project,
                                          ids)] == [ids[2]]
    assert [m['body'] for m in listed(ours, 'q', project)] == ['a']


@pytest.mark.parametrize('kept_wrong, shown', [
    (dict(body='B'), 'body differs'),
    (dict(ttl=3000), 'remaining ttl differs'),
    (dict(age_ms=0), 'age differs'),
    (dict(checksum='MD5:0'), 'checksum differs')])
def test_verify_compares_what_a_message_keeps(
        zaqar_redis, ours, control, migrate, project, monkeypatch,
        kept_wrong, shown):
    """A copy whose body, remaining ttl, age or checksum the target did
    not keep is a difference, and --delete-source leaves its source."""
    control.queue_controller.create('q', project=project)
    zaqar_redis.conf.set_override('enable_checksum', True)
    try:
        ids = posted_ago(100, lambda: zaqar_redis.message_controller.post(
            'q', [{'ttl': 600, 'body': 'a'}, {'ttl': 600, 'body': 'b'}],
            CLIENT, project=project))
    finally:
        zaqar_redis.conf.clear_override('enable_checksum')
    fields = dict(kept_wrong)
    if 'body' in fields:
        fields['body_json'] = json.dumps(fields['body'])
    carry_in_altered(ours, monkeypatch, lambda m: m._replace(
        **fields) if m.id == ids[1] else m)
    code, out = migrate('--project-id', project, '--delete-source')
    assert code == 1, out
    assert 'message {}: {}'.format(ids[1], shown) in out
    assert '1 verified, 1 differences, 1 deleted from the source' in out
    assert [m['id'] for m in zaqar_listed(zaqar_redis, 'q', project,
                                          ids)] == [ids[1]]


def test_a_killed_run_run_again_moves_the_rest_once(
        zaqar_redis, ours, control, config, own_redis, project,
        target_name):
    skip_mongomock_in_a_subprocess(target_name)
    # The kill must land while most of the queue is still to move: a
    # Redis target moves 600 messages in about a second, so it gets that
    # many; storing a message in Swift takes several requests, so half as
    # many leave the same margin there and halve the test's time.
    total, moved_batches = (300, 10) if target_name == 'swift' else (600, 20)
    control.queue_controller.create('q', project=project)
    ids = []
    for start in range(0, total, 100):
        ids += zaqar_post(zaqar_redis, 'q', project,
                          range(start, start + 100))
    command = migrate_command(config, own_redis.url, project, batch=10)
    after = killed_and_run_again(ours, command, project, ids, batch=10,
                                 moved_batches=moved_batches)
    assert [m['body'] for m in after] == list(range(total))


def test_checksum_and_poster_are_kept(zaqar_redis, ours, control, migrate,
                                      project):
    control.queue_controller.create('q', project=project)
    zaqar_redis.conf.set_override('enable_checksum', True)
    try:
        [mid] = zaqar_post(zaqar_redis, 'q', project, [{'x': 1}])
    finally:
        zaqar_redis.conf.clear_override('enable_checksum')
    [source] = zaqar_listed(zaqar_redis, 'q', project, [mid])
    assert migrate('--project-id', project)[0] == 0
    [moved] = listed(ours, 'q', project)
    assert moved['checksum'] == source['checksum']
    # Its poster's own listing without echo leaves it out.
    assert listed(ours, 'q', project, echo=False, client_uuid=CLIENT) == []


def test_the_command_is_a_console_script():
    import configparser
    setup = configparser.ConfigParser()
    setup.read('setup.cfg')
    scripts = setup['options.entry_points']['console_scripts']
    assert 'zaqar-delay-migrate = zaqar_delay.migrate.cli:main' in scripts


def test_subscriptions_past_a_short_page_are_carried(
        zaqar_redis, ours, control, migrate, project, monkeypatch):
    """Zaqar's Redis list leaves out a subscription whose hash expired
    while its id is still indexed, so a page comes back short with more
    to follow (and, when all it read had expired, with no marker): every
    live one is carried all the same. Pages of 2 here; the first page
    holds the expired one, the second only expired ones."""
    monkeypatch.setattr(sources, 'SUBSCRIPTIONS_PAGE', 2)
    control.queue_controller.create('q', project=project)
    subs = zaqar_redis.subscription_controller
    for n in range(6):
        subs.create('q', 'http://example.com/%d' % n, 3600, {},
                    project=project)
    listed_order = subs._client.zrange(
        redis_utils.scope_subscription_ids_set(
            'q', project, redis_subscriptions.SUBSCRIPTION_IDS_SUFFIX),
        0, -1)
    live = {subs.get('q', sid.decode(), project=project)['subscriber']
            for sid in listed_order[1:2] + listed_order[4:]}
    for expired in (0, 2, 3):
        # What Redis's expiry of the subscription's hash leaves.
        subs._client.delete(listed_order[expired])
    code, out = migrate('--project-id', project)
    assert code == 0, out
    assert ' 3 subscriptions' in out
    carried = list(next(ours.subscription_controller.list(
        'q', project=project, limit=10)))
    assert {sub['subscriber'] for sub in carried} == live


def test_a_message_redis_expired_is_counted_as_expired(
        zaqar_redis, ours, control, migrate, project):
    """Zaqar sets an EXPIRE on each message's hash: once Redis expired
    it, only its id is left in the queue's set (until Zaqar's gc). The
    command counts it as expired, and its progress reaches the total."""
    control.queue_controller.create('q', project=project)
    ids = zaqar_post(zaqar_redis, 'q', project, ['a', 'gone', 'b'])
    zaqar_redis.message_controller._client.delete(ids[1])
    code, out = migrate('--project-id', project, '--dry-run')
    assert code == 0, out
    assert '2 messages (1 expired, skipped)' in out
    assert 'counted: 3 / 3 messages' in out


def test_a_message_that_expires_between_verify_and_delete_moves_no_rank(
        zaqar_redis, ours, control, migrate, project, monkeypatch):
    """--delete-source: a message that Redis expires after it was
    verified, before its page's delete, is skipped by Zaqar's bulk
    delete, which then leaves its id in the set; the command takes it
    out, so the ranks it counts on (after_delete) stay right: every
    message is read once per pass and the source ends empty."""
    control.queue_controller.create('q', project=project)
    ids = zaqar_post(zaqar_redis, 'q', project, range(6))
    client = zaqar_redis.message_controller._client
    real_delete = sources.Source.delete

    def expires_first(self, queue, project_, message_ids):
        if message_ids and message_ids[0] == ids[2]:
            client.delete(ids[2])
        real_delete(self, queue, project_, message_ids)

    monkeypatch.setattr(sources.Source, 'delete', expires_first)
    code, out = migrate('--project-id', project, '--batch', '2',
                        '--delete-source')
    assert code == 0, out
    assert '6 verified, 0 differences, 6 deleted from the source' in out
    assert 'verified: 12 / 12 messages' in out
    assert 'verified: 13 /' not in out
    assert client.zcard(redis_utils.msgset_key('q', project)) == 0


def test_ten_differences_are_printed_and_all_counted(
        zaqar_redis, ours, control, migrate, project, monkeypatch):
    control.queue_controller.create('q', project=project)
    zaqar_post(zaqar_redis, 'q', project, range(12))
    carry_in_altered(ours, monkeypatch, lambda m: None)
    code, out = migrate('--project-id', project)
    assert code == 1, out
    assert out.count(': missing in the target') == 10
    assert '0 verified, 12 differences' in out


def test_a_copy_whose_ttl_a_target_claim_grew_still_verifies(
        zaqar_redis, ours, control, migrate, project):
    """A run after clients used the new store: a claim there grew a
    moved message's ttl (as Zaqar's drivers do), which is no difference."""
    control.queue_controller.create('q', project=project)
    zaqar_post(zaqar_redis, 'q', project, ['a'], ttl=300)
    assert migrate('--project-id', project)[0] == 0
    ours.claim_controller.create('q', {'ttl': 900, 'grace': 60},
                                 project=project, limit=1)
    [held] = listed(ours, 'q', project, include_claimed=True)
    assert held['ttl'] - held['age'] > 900, 'the claim grew it'
    code, out = migrate('--project-id', project, '--delete-source')
    assert code == 0, out
    assert '1 verified, 0 differences, 1 deleted from the source' in out


def test_a_message_the_target_cannot_store_stays_and_the_move_goes_on(
        zaqar_redis, ours, control, migrate, project):
    """Zaqar's transport takes NaN in a body (its JSON parser does) and
    its Redis store keeps it; our stores keep strict JSON. The refusal
    escaped the command as a traceback, so no queue after it ever moved,
    and every run stopped at the same message."""
    for name in ('a', 'b'):
        control.queue_controller.create(name, project=project)
    [refused] = zaqar_post(zaqar_redis, 'a', project, [float('nan')])
    [kept] = zaqar_post(zaqar_redis, 'a', project, ['fine too'])
    [fine] = zaqar_post(zaqar_redis, 'b', project, ['fine'])
    for _ in range(2):
        code, out = migrate('--project-id', project, '--delete-source')
        assert code == 1, out
        assert 'message {}: the target refused it, left in the source: ' \
            'message {} body cannot be stored as JSON'.format(
                refused, refused) in out
        [line] = [line for line in out.splitlines() if '/a: ' in line]
        assert '1 differences' in line, out
    assert [m['id'] for m in listed(ours, 'a', project)] == [kept]
    assert [m['id'] for m in listed(ours, 'b', project)] == [fine]
    assert [m['id'] for m in zaqar_listed(
        zaqar_redis, 'a', project, [refused, kept])] == [refused]
