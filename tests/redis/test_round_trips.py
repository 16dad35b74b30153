"""Redis: round trips and commands per call, counted, never timed.

Round trips are counted on the driver's own connection pool
(benchmarks/round_trips.py: one per request written to a socket); the
control store's (Zaqar's, for the queue's metadata) are not ours to
count. Commands a script runs inside Redis are counted with ``INFO
commandstats``.
"""

import time
import uuid

import pytest
import redis as redis_py
from zaqar.common import pipeline as common

from benchmarks import round_trips
from localstack import backends
from tests import metadata_copies
from tests.contract.helpers import CLIENT, claim, listed, post
from zaqar_delay import errors
from zaqar_delay import stages
from zaqar_delay import sticky
from zaqar_delay.drivers.redis import driver as redis_driver
from zaqar_delay.drivers.redis import keys


@pytest.fixture
def raw(redis_url):
    return redis_py.Redis.from_url(redis_url)


def data_round_trips(driver, call):
    with round_trips.counting() as counter:
        call()
    return counter.of(driver.connection)


def test_a_post_stores_and_registers_its_queue_in_one_script_call(
        driver, raw, project):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'warm-up')  # loads the script once
    raw.srem(keys.QUEUE_REGISTRY, keys.queue_tag('q', project))
    sent = data_round_trips(driver, lambda: post(
        driver, 'q', project, *range(10)))
    assert sent == 2
    # The queue's metadata copy, then the script; the registry (for gc)
    # was written by the script.
    assert raw.sismember(keys.QUEUE_REGISTRY, keys.queue_tag('q', project))


def test_a_first_post_runs_no_per_id_check(driver, raw, project):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'warm-up')
    raw.config_resetstat()
    post(driver, 'q', project, *range(10))
    stats = raw.info('commandstats')
    # One EXISTS for the whole post (was the queue empty?), none per id;
    # no ZSCORE in the deleted ids: fresh ids cannot be among them.
    assert stats['cmdstat_exists']['calls'] == 1
    assert 'cmdstat_zscore' not in stats
    assert len(listed(driver, 'q', project)) == 11


def test_a_post_into_a_queue_just_purged_registers_it_again(
        driver, raw, project, monkeypatch):
    # Single server: the whole deletion (purge, unregister) runs just
    # before the post's script; the script registers the queue itself.
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'before')
    original = driver.scripts.run
    purges = [driver.message_controller._purge_queue]

    def deletion_first(name, *args, **kwargs):
        if name == 'post' and purges:
            purges.pop()('q', project)
        return original(name, *args, **kwargs)

    monkeypatch.setattr(driver.scripts, 'run', deletion_first)
    post(driver, 'q', project, 'racing')
    assert raw.sismember(keys.QUEUE_REGISTRY, keys.queue_tag('q', project))
    assert [m['body'] for m in listed(driver, 'q', project)] == ['racing']


def second_node(driver, conf, redis_url):
    """Another API node: its own driver and control driver, same stores."""
    return redis_driver.DataDriver(conf, None,
                                   backends.control_driver(conf, redis_url))


def warm(driver, project, queue='q'):
    """Two calls: the first fills the copy, the second reads it into the
    process's cache."""
    post(driver, queue, project, 'warm-up')
    listed(driver, queue, project)


def test_every_hot_call_is_one_round_trip_once_warm(driver, project):
    driver.queue_controller.create('q', project=project)
    warm(driver, project)
    post(driver, 'q', project, 'to get')
    message_id = listed(driver, 'q', project)[-1]['id']
    messages = driver.message_controller
    control = driver.control_driver.connection
    claims = []
    calls = {
        'post': lambda: post(driver, 'q', project, *range(10)),
        'claim': lambda: claims.append(claim(driver, 'q', project, limit=10)),
        'list': lambda: list(next(messages.list(
            'q', project=project, client_uuid=CLIENT, include_claimed=True))),
        'get': lambda: messages.get('q', message_id, project=project),
        'first': lambda: messages.first('q', project=project),
        'pop': lambda: messages.pop('q', 2, project=project),
        'delete': lambda: messages.delete('q', message_id, project=project,
                                          claim=claims[0][0]),
    }
    for name in ('claim', 'list', 'get', 'first'):
        calls[name]()   # loads the call's scripts into Redis once
    messages.delete('q', str(uuid.uuid4()), project=project)
    sent, commands = {}, {}
    for name, call in calls.items():
        with round_trips.counting() as counter:
            call()
        sent[name] = (counter.of(driver.connection), counter.of(control))
        commands[name] = counter.commands_of(driver.connection)
    # The script alone: the policy comes from the process's copy, whose
    # generation the script checks before it acts.
    assert sent == {name: (1, 0) for name in calls}
    assert commands == {name: [['EVALSHA']] for name in calls}


def test_every_other_change_to_a_queue_is_one_script_once_warm(
        driver, project):
    # README: each change to a queue is one Lua script; the hot calls
    # are counted above, these here. Retention on, so that its clean has
    # something to do (without a policy it asks the store nothing).
    driver.queue_controller.create(
        'q', metadata={'_retention': {'length': 100}}, project=project)
    warm(driver, project)
    messages, claims = driver.message_controller, driver.claim_controller
    control = driver.control_driver.connection

    def changes():
        ids = post(driver, 'q', project, *range(10))
        renewed, _ = claim(driver, 'q', project, limit=3)
        released, _ = claim(driver, 'q', project, limit=3)
        return {
            'bulk_delete': lambda: messages.bulk_delete(
                'q', ids[6:8], project=project),
            'renew': lambda: claims.update(
                'q', renewed, {'ttl': 120, 'grace': 60}, project=project),
            'release': lambda: claims.delete('q', released,
                                             project=project),
            'clean': lambda: messages.clean('q', project, 100),
        }

    for call in changes().values():
        call()   # loads the call's scripts into Redis once
    sent, commands = {}, {}
    for name, call in changes().items():
        with round_trips.counting() as counter:
            call()
        sent[name] = (counter.of(driver.connection), counter.of(control))
        commands[name] = counter.commands_of(driver.connection)
    assert sent == {name: (1, 0) for name in sent}
    # One script each, not a pipeline of commands written at once.
    assert commands == {name: [['EVALSHA']] for name in sent}
    assert set(sent) == {'bulk_delete', 'renew', 'release', 'clean'}


def test_a_stale_cached_policy_acts_on_nothing_and_the_call_runs_again(
        driver, conf, redis_url, raw, project):
    other = second_node(driver, conf, redis_url)
    driver.queue_controller.create('q', project=project)
    warm(other, project)
    driver.queue_controller.set_metadata(
        'q', {'_default_message_delay': 600}, project=project)
    raw.config_resetstat()
    # The other node's cache still says "no delay": its post script finds
    # the generation moved, stores nothing, and the post runs again with
    # the policy read afresh.
    post(other, 'q', project, 'delayed')
    bodies = [m['body'] for m in listed(other, 'q', project,
                                        include_delayed=True)]
    assert bodies == ['warm-up', 'delayed']
    assert [m['body'] for m in listed(other, 'q', project)] == ['warm-up']
    assert raw.info('commandstats')['cmdstat_evalsha']['calls'] >= 2


def test_a_refusal_by_a_stale_cached_policy_is_checked_first(
        driver, conf, redis_url, project):
    # A call that ends before any script (here a claim without a client
    # on a queue its cache says is sticky) checks the generation it
    # assumed before it answers.
    other = second_node(driver, conf, redis_url)
    driver.queue_controller.create(
        'q', {'_message_group_key': 'g', '_message_group_sticky': 60},
        project=project)
    post(other, 'q', project, 'warm-up', 'second')
    with sticky.acting_as(str(CLIENT)):
        listed(other, 'q', project)
    with pytest.raises(errors.InvalidInput):
        other.claim_controller.create('q', {'ttl': 60, 'grace': 60},
                                      project=project, limit=1)
    driver.queue_controller.set_metadata('q', {}, project=project)
    claim_id, claimed = other.claim_controller.create(
        'q', {'ttl': 60, 'grace': 60}, project=project, limit=1)
    assert claim_id is not None and len(list(claimed)) == 1


def test_a_metadata_change_on_this_node_is_not_served_from_its_cache(
        driver, project):
    driver.queue_controller.create('q', project=project)
    warm(driver, project)
    driver.queue_controller.set_metadata(
        'q', {'_default_message_delay': 600}, project=project)
    with round_trips.counting() as counter:
        post(driver, 'q', project, 'delayed')
    # The write dropped this node's cached copy: read, fill, post; no
    # stale script first.
    assert counter.of(driver.connection) == 3
    assert [m['body'] for m in listed(driver, 'q', project)] == ['warm-up']


def test_zaqar_reads_queue_metadata_from_the_copy_not_the_control_store(
        driver, project):
    # Its transport reads the metadata before every post: one round trip
    # to the data store instead of two to the control store.
    queues = common.Pipeline([stages.QueueStage(driver,
                                                driver.control_driver),
                              driver.queue_controller])
    driver.queue_controller.create('q', {'_max_claim_count': 3},
                                   project=project)
    warm(driver, project)
    with round_trips.counting() as counter:
        assert queues.get_metadata('q', project=project) == {
            '_max_claim_count': 3}
    assert counter.of(driver.control_driver.connection) == 0
    assert counter.of(driver.connection) == 1


def count_policy_checks(driver, monkeypatch):
    """The list each check of a queue's metadata into a policy (the
    message controller's ``check_metadata``) appends its arguments to."""
    checked = []
    controller = type(driver.message_controller)
    check = controller.check_metadata

    def counted(self, *args, **kwargs):
        checked.append(args)
        return check(self, *args, **kwargs)

    monkeypatch.setattr(controller, 'check_metadata', counted)
    return checked


def test_a_cached_copy_is_checked_into_a_policy_once(
        driver, project, monkeypatch):
    driver.queue_controller.create('q', project=project)
    warm(driver, project)
    checked = count_policy_checks(driver, monkeypatch)
    for n in range(5):
        post(driver, 'q', project, n)
        listed(driver, 'q', project)
    assert len(checked) <= 1
    # A change is a new copy, checked again: the delay applies at once.
    driver.queue_controller.set_metadata(
        'q', {'_default_message_delay': 600}, project=project)
    post(driver, 'q', project, 'delayed')
    assert 'delayed' not in [m['body'] for m in listed(driver, 'q', project)]
    assert len(checked) >= 2


def test_a_copy_zaqar_reads_before_each_call_is_checked_once(
        driver, project, monkeypatch):
    # Zaqar's transport reads the metadata (through our queue stage, from
    # the copy) before every post and listing: a copy found as it was is
    # the object its policy was checked from, not a new one to check.
    queues = common.Pipeline([stages.QueueStage(driver,
                                                driver.control_driver),
                              driver.queue_controller])
    stored = {'owner': {'teams': ['a']}}
    driver.queue_controller.create('q', stored, project=project)
    warm(driver, project)
    checked = count_policy_checks(driver, monkeypatch)
    for n in range(5):
        handed = queues.get_metadata('q', project=project)
        assert handed == stored
        # Zaqar gets a copy of its own, nested values too: what it does
        # with it stays there.
        handed['_default_message_delay'] = 600
        handed['owner']['teams'].append('b')
        post(driver, 'q', project, n)
        assert queues.get_metadata('q', project=project) == stored
        listed(driver, 'q', project)
    assert len(checked) <= 1
    assert [m['body'] for m in listed(driver, 'q', project)][-5:] == list(
        range(5))
    before_change = len(checked)
    driver.queue_controller.set_metadata(
        'q', {'_default_message_delay': 600}, project=project)
    assert queues.get_metadata('q', project=project) == {
        '_default_message_delay': 600}
    post(driver, 'q', project, 'delayed')
    assert 'delayed' not in [m['body'] for m in listed(driver, 'q', project)]
    assert len(checked) > before_change


def test_the_process_keeps_a_copy_no_longer_than_the_store_does(
        driver, raw, project):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'fills the copy')
    prefix = keys.queue_prefix('q', project)
    raw.pexpire(prefix + ':meta', 200)
    raw.set(prefix + ':metagen', '7', px=100)
    driver.metadata_copies.process_cache.drop('q', project)
    copy, generation = driver.metadata_copies.find('q', project)
    assert (copy, generation) == ({}, '7')
    assert driver.metadata_copies.process_cache.get('q', project) == (
        {}, '7')
    time.sleep(0.15)
    # The generation expired first: a change could start it again at 7.
    assert driver.metadata_copies.process_cache.get('q', project) is None


def test_a_metadata_change_applies_to_the_next_call_on_every_node(
        driver, conf, redis_url, project):
    metadata_copies.a_metadata_change_applies_to_the_next_call_on_every_node(
        driver, second_node(driver, conf, redis_url), project)


def test_a_queue_deleted_on_one_node_is_gone_on_the_next_call_of_another(
        driver, conf, redis_url, project):
    metadata_copies.\
        a_queue_deleted_on_one_node_is_gone_on_the_next_call_of_another(
            driver, second_node(driver, conf, redis_url), project)


def test_a_fill_that_read_the_control_store_before_a_change_is_dropped(
        driver, raw, project, monkeypatch):
    # The copy is missing; the fill reads the old metadata from the control
    # store, then the metadata changes before the fill is stored.
    driver.queue_controller.create('q', project=project)
    queues = driver.queue_controller
    original = driver.scripts.run

    def change_first(name, *args, **kwargs):
        if name == 'meta_fill':
            queues.set_metadata('q', {'_default_message_delay': 600},
                                project=project)
        return original(name, *args, **kwargs)

    monkeypatch.setattr(driver.scripts, 'run', change_first)
    post(driver, 'q', project, 'old policy')   # raced: {} from before
    monkeypatch.setattr(driver.scripts, 'run', original)
    assert not raw.exists(keys.queue_prefix('q', project) + ':meta')
    post(driver, 'q', project, 'delayed')
    assert [m['body'] for m in listed(driver, 'q', project)] == [
        'old policy']


def test_a_metadata_change_keeps_its_generation_for_the_shared_lifetime(
        driver, raw, project, monkeypatch):
    # The lifetime is the one MongoDB's copies use too
    # (metadata_copy.GENERATION_TTL_MS); set to 5 minutes here, a change
    # must leave its generation expiring in about 5 minutes, not a day.
    from zaqar_delay import metadata_copy
    monkeypatch.setattr(metadata_copy, 'GENERATION_TTL_MS', 300 * 1000)
    driver.queue_controller.create('q', project=project)
    driver.queue_controller.set_metadata('q', {'_default_message_delay': 1},
                                         project=project)
    remaining = raw.pttl(keys.queue_prefix('q', project) + ':metagen')
    assert 290 * 1000 < remaining <= 300 * 1000


def test_the_driver_packs_and_parses_with_hiredis(driver):
    # setup.cfg asks for redis[hiredis]: redis-py's pure Python packing
    # and parsing cost about a fifth of the driver's CPU per message
    # (docs/performance.md, "hiredis").
    from redis import connection as redis_connection
    from redis._parsers import hiredis
    connection = driver.connection.connection_pool.make_connection()
    assert isinstance(connection._parser, hiredis._HiredisParser)
    assert isinstance(connection._command_packer,
                      redis_connection.HiredisRespSerializer)
