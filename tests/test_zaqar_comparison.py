"""What the README says about Zaqar 23's own drivers, shown on them (and
that ours do not share it): both drivers built as the benchmarks build
them (benchmarks/run.py), on the test redis-server and on mongomock."""

import uuid

import pymongo.errors
import pytest
import redis as redis_py

from benchmarks import run

pytestmark = [pytest.mark.integration]

CLAIM = {'ttl': 60, 'grace': 60}


def post_ready_then_delayed(driver, project):
    # A delayed queue: on others Zaqar's transport drops a message's delay.
    queue = 'q-' + uuid.uuid4().hex[:8]
    driver.queue_controller.create(
        queue, metadata={'_default_message_delay': 30}, project=project)
    client = uuid.uuid4()
    driver.message_controller.post(
        queue, [{'ttl': 300, 'body': 'ready', 'delay': 0}], client,
        project=project)
    driver.message_controller.post(
        queue, [{'ttl': 300, 'body': 'delayed', 'delay': 600}], client,
        project=project)
    return queue


def claimed_bodies(driver, queue, project):
    _, messages = driver.claim_controller.create(queue, CLAIM,
                                                 project=project, limit=10)
    return sorted(m['body'] for m in messages)


def test_zaqars_redis_claim_hands_out_a_delayed_message_behind_a_ready_one(
        redis_url):
    # Its claim script checks the delay only until it meets the first
    # claimable message, then takes everything after it.
    ours, theirs = run.redis_pair(redis_url)
    project = 'cmp-' + uuid.uuid4().hex[:6]
    queue = post_ready_then_delayed(theirs, project)
    assert claimed_bodies(theirs, queue, project) == ['delayed', 'ready']
    queue = post_ready_then_delayed(ours, project)
    assert claimed_bodies(ours, queue, project) == ['ready']


def commands_run(redis_url, call):
    """The commands redis-server ran for ``call()``, scripts' included."""
    with redis_py.Redis.from_url(redis_url) as raw:
        raw.config_resetstat()
        call()
        return {name[len('cmdstat_'):]: stat['calls']
                for name, stat in raw.info('commandstats').items()}


def test_zaqars_redis_claim_reads_every_delayed_message_ahead(own_redis):
    # A redis-server of its own: servers other tests leave running on the
    # worker's shared one could add commands to the count.
    redis_url = own_redis.url
    # Its claim script walks the queue from its head, one HMGET per
    # message, until it meets a claimable one; ours reads the claimable
    # index. The same queue on each: 300 delayed messages, then 1 ready.
    ours, theirs = run.redis_pair(redis_url)
    project = 'cmp-' + uuid.uuid4().hex[:6]
    delayed = [{'ttl': 300, 'body': n, 'delay': 600} for n in range(300)]
    ran = {}
    for name, driver in (('ours', ours), ('theirs', theirs)):
        queue = 'q-' + uuid.uuid4().hex[:8]
        driver.queue_controller.create(
            queue, metadata={'_default_message_delay': 30}, project=project)
        client = uuid.uuid4()
        for start in range(0, 300, 100):
            driver.message_controller.post(
                queue, delayed[start:start + 100], client, project=project)
        driver.message_controller.post(
            queue, [{'ttl': 300, 'body': 'ready', 'delay': 0}], client,
            project=project)
        claimed = []
        ran[name] = commands_run(redis_url, lambda: claimed.extend(
            claimed_bodies(driver, queue, project)))
        assert 'ready' in claimed
    assert ran['theirs'].get('hmget', 0) >= 300
    assert sum(ran['ours'].values()) < 50, ran['ours']


def test_zaqars_mongodb_pop_loses_a_message_whose_reply_is_lost(
        redis_url, monkeypatch):
    # One find_one_and_delete: when its reply is lost (it ran, then the
    # connection failed), Zaqar's retry finds nothing left, so the pop
    # answers empty and the message is gone: nobody got it.
    _, theirs = run.mongodb_pair(redis_url, None)
    theirs.conf.set_override('reconnect_sleep', 0,
                             group='drivers:message_store:mongodb')
    project = 'cmp-' + uuid.uuid4().hex[:6]
    queue = 'q-' + uuid.uuid4().hex[:8]
    theirs.queue_controller.create(queue, project=project)
    theirs.message_controller.post(queue, [{'ttl': 300, 'body': 'only'}],
                                   uuid.uuid4(), project=project)
    collection = type(theirs.message_controller._collection(queue, project))
    ran = collection.find_one_and_delete
    lost = []

    def reply_lost_once(self, *args, **kwargs):
        found = ran(self, *args, **kwargs)
        if not lost:
            lost.append(found)
            raise pymongo.errors.AutoReconnect('reply lost')
        return found

    monkeypatch.setattr(collection, 'find_one_and_delete', reply_lost_once)
    assert theirs.message_controller.pop(queue, 1, project=project) == []
    monkeypatch.undo()
    assert lost[0] is not None  # the first try did take it
    assert theirs.message_controller._count(queue, project,
                                            include_claimed=True) == 0
