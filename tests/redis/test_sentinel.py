"""Redis Sentinel: a master, a replica and three Sentinels on loopback.

The driver is given Zaqar's Sentinel URI form. The master is SIGKILLed
while a producer posts; the driver must follow the failover without a
restart (its own retries carry calls across it, the Lua scripts are loaded
again on the new master), and afterwards the queue must hold what Redis
replication promises: everything replicated before the kill (messages,
claims, deletions, delays), every post acknowledged after the failover,
nothing twice. Posts acknowledged by the old master in the last moment
before the kill may be lost (replication is asynchronous); the test
prints how many were. A second failover, with no producer, checks that a
grouped queue keeps its group order, its claimed heads and its delays.
"""

import hashlib
import threading
import time

import pytest
import redis as redis_py
from zaqar.storage import errors as storage_errors

from localstack import backends
from tests import conftest
from tests.contract.helpers import claim, listed, post, stats
from localstack import redis_sentinel
from localstack.redis_server import RedisUnavailable
from zaqar_delay import errors as zaqar_delay_errors
from zaqar_delay.drivers.redis import driver as redis_driver
from zaqar_delay.drivers.redis import scripts

pytestmark = pytest.mark.slow

GROUP = 'drivers:message_store:delay.redis'


@pytest.fixture
def sentinels():
    try:
        servers = redis_sentinel.SentinelSet().start()
    except RedisUnavailable as exc:
        conftest.unavailable(str(exc))
    yield servers
    servers.stop()


def make_driver(uri, redis_url, attempts):
    conf = backends.make_conf(**{GROUP: {
        'uri': uri, 'socket_timeout': 2.0, 'reconnect_sleep': 0.2,
        'max_reconnect_attempts': attempts}})
    return redis_driver.DataDriver(conf, None,
                                   backends.control_driver(conf, redis_url))


def test_uri_names_the_sentinels_and_the_master():
    from zaqar_delay.drivers.redis import connection
    client = connection.client_from_uri(
        'delay.redis://:pw@h1:26380,h2,[::1]:5/2?master=mm'
        '&sentinel_password=sp', 1)
    pool = client.connection_pool
    assert pool.service_name == 'mm'
    assert (pool.connection_kwargs['db'],
            pool.connection_kwargs['password']) == (2, 'pw')
    watched = [(s.connection_pool.connection_kwargs['host'],
                s.connection_pool.connection_kwargs['port'],
                s.connection_pool.connection_kwargs['password'])
               for s in pool.sentinel_manager.sentinels]
    assert watched == [('h1', 26380, 'sp'), ('h2', 26379, 'sp'),
                       ('::1', 5, 'sp')]
    # docs/scaling.md: a user for the Sentinels too, when they need one.
    named = connection.client_from_uri(
        'delay.redis://h1?master=mm&sentinel_username=su'
        '&sentinel_password=sp', 1).connection_pool
    assert [(s.connection_pool.connection_kwargs['username'],
             s.connection_pool.connection_kwargs['password'])
            for s in named.sentinel_manager.sentinels] == [('su', 'sp')]
    # Zaqar's own name for the database, in the query.
    assert connection.client_from_uri(
        'redis://h1,h2?master=m&dbid=3', 1).connection_pool \
        .connection_kwargs['db'] == 3
    with pytest.raises(ValueError, match=r"'h1,h2'.*\?master="):
        connection.client_from_uri('delay.redis://h1,h2/0', 1)
    with pytest.raises(ValueError, match="':5' names no host"):
        connection.client_from_uri('delay.redis://h1,:5?master=m', 1)


def test_a_failover_is_followed_and_keeps_what_was_replicated(
        sentinels, redis_url, project):
    # Enough retries to outlast a failover: sleeps of 0.2 s doubling, 8
    # attempts (the failover takes down-after 1 s plus an election).
    driver = make_driver(sentinels.uri, redis_url, attempts=8)
    impatient = make_driver(sentinels.uri, redis_url, attempts=0)
    control = driver.queue_controller
    control.create('q', project=project)
    control.create('dq', metadata={'_default_message_delay': 60},
                   project=project)
    before = ['b%d' % i for i in range(10)]
    post(driver, 'q', project, *before)
    claim_id, claimed = claim(driver, 'q', project, limit=4)
    deleted = claimed[:2]
    for message in deleted:
        driver.message_controller.delete('q', message['id'], project,
                                         claim=claim_id)
    post(driver, 'dq', project, 'delayed')
    old_master = redis_py.Redis(port=sentinels.master.port)
    replica = redis_py.Redis(port=sentinels.replica.port)
    # Everything so far is on the replica; its script cache is empty, so
    # the new master will answer NOSCRIPT and the driver must load them.
    assert old_master.wait(1, 5000) == 1
    claim_sha = hashlib.sha1(scripts.source('claim').encode()).hexdigest()
    assert replica.script_exists(claim_sha) == [False]

    impatient_saw = []

    def kill():
        sentinels.kill_master()
        # The old master is gone and the Sentinels wait down-after (1 s)
        # before they fail over: a driver without retries gets Zaqar's
        # storage error (503), not a stack trace.
        try:
            post(impatient, 'q', project, 'never')
        except Exception as exc:
            impatient_saw.append(exc)

    acked, failed, slowest = [], [], 0.0
    killer = threading.Timer(0.3, kill)
    killer.start()
    failed_over_at = None
    i = 0
    while failed_over_at is None or i < failed_over_at + 20:
        body = 'p%d' % i
        started = time.monotonic()
        try:
            post(driver, 'q', project, body)
            acked.append(body)
        except storage_errors.ConnectionError:
            failed.append(body)
        slowest = max(slowest, time.monotonic() - started)
        if (failed_over_at is None and killer.finished.is_set()
                and sentinels.master_port() == sentinels.replica.port):
            failed_over_at = i
        i += 1
        assert i < 10000, 'no failover'

    killer.join()
    assert [type(e) for e in impatient_saw] == [
        zaqar_delay_errors.BackendUnavailable]
    # Same driver, no restart: claims (NOSCRIPT, then loaded) and deletes.
    later_id, later = claim(driver, 'q', project, limit=3)
    assert len(later) == 3
    assert replica.script_exists(claim_sha) == [True]

    everything = listed(driver, 'q', project, include_claimed=True)
    bodies = [m['body'] for m in everything]
    assert len(bodies) == len(set(bodies)), 'a message stored twice'
    assert 'never' not in bodies
    deleted_bodies = {m['body'] for m in deleted}
    assert set(before) - deleted_bodies <= set(bodies)
    assert not deleted_bodies & set(bodies)
    still_claimed = driver.claim_controller.get('q', claim_id, project)[1]
    assert {m['body'] for m in still_claimed} == {
        m['body'] for m in claimed[2:]}
    # Acknowledged after the Sentinels named the new master: all kept.
    after = acked[acked.index('p%d' % failed_over_at):] \
        if 'p%d' % failed_over_at in acked else []
    assert after and set(after) <= set(bodies)
    lost = [b for b in acked if b not in bodies]
    stats = driver.message_controller.stats('dq', project)['messages']
    assert stats['delayed'] == 1
    assert claim(driver, 'dq', project)[1] == []
    print('\nsentinel failover: {} posts acknowledged, {} failed, slowest '
          'call {:.2f} s, acknowledged but lost: {} {}'.format(
              len(acked), len(failed), slowest, len(lost), lost))
    driver.close()
    impatient.close()


# A delay and a claim ttl far longer than a failover, so the first checks
# after it run with the new master's own clock; the driver's clock hook
# then moves to just before and just after them instead of sleeping.
DELAY_S = 300


def server_ms(client):
    seconds, micros = client.time()
    return seconds * 1000 + micros // 1000


def labels(messages):
    return ['%s%s' % (m['body'].get('g', ''), m['body']['n'])
            for m in messages]


def test_a_failover_keeps_groups_and_delays(sentinels, redis_url, project):
    driver = make_driver(sentinels.uri, redis_url, attempts=8)
    messages = driver.message_controller
    driver.queue_controller.create('gq', project=project, metadata={
        '_message_group_key': 'g', '_default_message_delay': DELAY_S})
    handed = []

    def take(ttl=600, limit=10):
        claim_id, got = claim(driver, 'gq', project, limit=limit, ttl=ttl)
        handed.extend(labels(got))
        return claim_id, got

    def ack(*claims):
        for claim_id, got in claims:
            for message in got:
                messages.delete('gq', message['id'], project,
                                claim=claim_id)

    def state():
        every = listed(driver, 'gq', project, include_claimed=True,
                       include_delayed=True)
        groups = next(messages.list_groups('gq', project=project, limit=20))
        counts = stats(driver, 'gq', project)
        return ([(m['id'], m['body']) for m in every],
                [(g['id'], g['depth'], g['head'], g['in_flight'])
                 for g in groups],
                {k: counts[k] for k in ('total', 'free', 'claimed', 'delayed',
                                        'groups', 'groups_in_flight')})

    first = 'a1 b1 c1 f1 d1 a2 b2 c2 f2 d2 a3'.split()
    post(driver, 'gq', project, *[{'g': x[0], 'n': int(x[1])} for x in first],
         ttl=3600, delay=0)
    old_master = redis_py.Redis(port=sentinels.master.port)
    a_claim = take(limit=1)
    # Claim B, e1 and late get their expiry / due time in [t_a, t_b] + 300 s.
    t_a = server_ms(old_master)
    take(ttl=DELAY_S, limit=1)
    post(driver, 'gq', project, {'g': 'e', 'n': 1}, {'n': 'late'}, ttl=3600)
    post(driver, 'gq', project, {'g': 'e', 'n': 2}, ttl=3600, delay=0)
    t_b = server_ms(old_master)
    ack(take(limit=1))
    f_claim = take(limit=1)
    assert handed == ['a1', 'b1', 'c1', 'f1']
    before = state()
    sentinels.wait_until_replicated()

    sentinels.kill_master()
    failover_s = sentinels.wait_for_failover()
    new_master = redis_py.Redis(port=sentinels.replica.port)
    assert server_ms(new_master) < t_a + (DELAY_S - 60) * 1000, (
        'the failover outlasted the delays this test checks')
    handed.clear()
    # Messages, claims (in flight, claimed), c1's deletion, delays (delayed)
    # and groups (ids, depths, heads): any of them lost changes this.
    assert state() == before
    # Claims of a1, b1, f1 kept: else they come back here; group order
    # kept: else a2, b2, f2 or d2 (behind claimed or live heads) do; c1's
    # deletion kept: else c1 instead of c2; delays kept: else e1, late.
    d_and_c = take()
    assert labels(d_and_c[1]) == ['d1', 'c2']
    # A head whose message is deleted under its pre-failover claim: the
    # next of its group, not the one after.
    ack(a_claim)
    a2 = take()
    assert labels(a2[1]) == ['a2']
    # A released pre-failover claim: the same head again, not f2.
    driver.claim_controller.delete('gq', f_claim[0], project=project)
    f1 = take()
    assert labels(f1[1]) == ['f1'] and f1[1][0]['claim_count'] == 2

    clock = backends.FakeClock()
    driver.use_clock(clock)
    clock.now_ms = t_a + DELAY_S * 1000 - 1
    # Just before any of them can be due or expire: claim B still holds b,
    # e1 and late are still delayed (a lost delay or claim shows here), e2
    # waits behind its delayed head, a3, d2, f2 behind claimed heads.
    assert take() == (None, [])
    clock.now_ms = t_b + DELAY_S * 1000
    # Just after: claim B expired (b1 again, its second claim), e1 and
    # late are due; b2 and e2 still wait behind their heads.
    due = take()
    assert labels(due[1]) == ['b1', 'e1', 'late']
    assert due[1][0]['claim_count'] == 2
    ack(d_and_c, a2, f1, due)
    last = take()
    assert labels(last[1]) == ['b2', 'f2', 'd2', 'a3', 'e2']
    ack(last)
    assert take() == (None, [])
    assert stats(driver, 'gq', project)['total'] == 0
    # Once each after the failover (b1 again after its claim expired), each
    # group in posting order.
    assert len(handed) == len(set(handed))
    for group in 'abcdef':
        mine = [h for h in handed if h[0] == group]
        assert mine == sorted(mine)
    print('\nsentinel failover with groups and delays: failed over in '
          '{:.1f} s'.format(failover_s))
    driver.close()
