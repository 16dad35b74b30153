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
from tests.contract.helpers import listed, post
from zaqar_delay.drivers.redis import keys


@pytest.fixture
def raw(redis_url):
    return redis_py.Redis.from_url(redis_url)


def data_round_trips(driver, call):
    with round_trips.counting() as counter:
        call()
    return counter.of(driver.connection)


def test_a_post_stores_and_registers_its_queue_in_one_round_trip(
        driver, raw, project):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'warm-up')  # loads the script once
    raw.srem(keys.QUEUE_REGISTRY, keys.queue_tag('q', project))
    sent = data_round_trips(driver, lambda: post(
        driver, 'q', project, *range(10)))
    assert sent == 1
    # The registry (for gc) was written in that same round trip.
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
