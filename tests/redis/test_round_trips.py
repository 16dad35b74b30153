"""Redis: round trips and commands per call, counted, never timed.

Round trips are counted on the driver's own connection pool
(benchmarks/round_trips.py: one per request written to a socket); the
control store's (Zaqar's, for the queue's metadata) are not ours to
count. Commands a script runs inside Redis are counted with ``INFO
commandstats``.
"""

import pytest
import redis as redis_py

from benchmarks import round_trips
from localstack import backends
from tests import metadata_copies
from tests.contract.helpers import claim, listed, post
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


def test_post_claim_and_list_read_no_control_store_once_warm(
        driver, project):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'warm-up')
    claim(driver, 'q', project)
    listed(driver, 'q', project)
    control = driver.control_driver.connection
    for call in (lambda: post(driver, 'q', project, *range(10)),
                 lambda: claim(driver, 'q', project, limit=10),
                 lambda: listed(driver, 'q', project)):
        with round_trips.counting() as counter:
            call()
        # The metadata copy, then the script.
        assert (counter.of(driver.connection), counter.of(control)) == (2, 0)


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
