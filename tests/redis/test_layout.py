"""Redis-specific: key layout, hash tags, script costs and crash recovery."""

import json
import re
import uuid

import pytest
import redis as redis_py
from zaqar.storage import errors as storage_errors

from localstack import backends
from tests.contract.helpers import CLIENT, claim, listed, post
from localstack.factories import redis as factories_redis
from zaqar_delay import sticky
from zaqar_delay.drivers.redis import driver as redis_driver
from zaqar_delay.drivers.redis import keys
from zaqar_delay.drivers.redis import layout


@pytest.fixture
def raw(redis_url):
    return redis_py.Redis.from_url(redis_url)


def ours(raw, project):
    tag = keys.queue_tag('', project).rstrip('/')
    return [k.decode() for k in raw.scan_iter('zd:{%s/*' % tag)]


def slot_tag(key):
    return re.match(r'[^{]*\{([^}]*)\}', key).group(1)


@pytest.mark.parametrize('project', ['plain', 'a}b{c', 'x/y:z', '\u2603',
                                     '*?[]', 'zd:{other/q}'])
def test_every_key_of_a_queue_shares_one_intact_hash_tag(driver, raw,
                                                         project):
    driver.queue_controller.create('q', project=project)
    ids = post(driver, 'q', project, 'a', 'b')
    claim(driver, 'q', project, limit=1)
    found = ours(raw, project)
    assert found and all(k.startswith('zd:{') for k in found)
    assert {slot_tag(k) for k in found} == {keys.queue_tag('q', project)}
    assert not any(k in ids for k in (x.decode() for x in raw.keys()))


def test_a_deleted_queue_keeps_its_position_counter_a_day(driver, raw,
                                                           project):
    """Kept so that positions read before a deletion stay below those of
    the queue created again; kept for good once that queue is posted to,
    gone after a day otherwise (queues deleted for good leave no key)."""
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a', 'b')
    driver.message_controller._purge_queue('q', project)
    seq = keys.queue_prefix('q', project) + ':seq'
    assert raw.get(seq) == b'2'
    assert 0 < raw.pttl(seq) <= 86400 * 1000
    post(driver, 'q', project, 'c')
    assert (raw.get(seq), raw.pttl(seq)) == (b'3', -1)


def test_gc_keeps_the_position_counter_of_a_queue_with_messages(
        driver, raw, project):
    """A node of an earlier release posting first to a queue deleted and
    created again does not keep the counter for good (its post.lua
    knows nothing of the deletion's expiry): later posts find the queue
    not empty, and positions would start again under its messages once
    the day is over. gc keeps the counter of a queue with messages."""
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a')
    seq = keys.queue_prefix('q', project) + ':seq'
    raw.pexpire(seq, 86400 * 1000)      # as such a first post leaves it
    driver.gc()
    assert raw.pttl(seq) == -1


def test_a_claim_does_not_read_delayed_messages(driver, raw, project):
    driver.queue_controller.create(
        'q', metadata={'_default_message_delay': 600}, project=project)
    for _ in range(10):
        driver.message_controller.post(
            'q', [{'ttl': 900, 'body': i} for i in range(100)], CLIENT,
            project=project)
    post(driver, 'q', project, 'ready', delay=0)
    raw.config_resetstat()
    assert [m['body'] for m in claim(driver, 'q', project)[1]] == ['ready']
    reads = message_hash_reads(raw)
    assert reads <= 3, 'claim read %d message hashes' % reads


# What a client sends to set up a connection, not for a call.
HANDSHAKE = {'HELLO', 'CLIENT', 'SELECT', 'AUTH'}


def monitored(raw, call):
    """The commands Redis ran during ``call()``, its scripts' included
    (MONITOR), each as its list of arguments; connection set-ups left
    out."""
    end = 'zd-test-monitor-end-' + uuid.uuid4().hex
    seen = []
    with raw.monitor() as monitor:
        call()
        raw.echo(end)
        while True:
            command = monitor.next_command()['command']
            if end in command:
                return seen
            if command.split(' ')[0].upper() not in HANDSHAKE:
                seen.append(command.split(' '))


def claim_behind(driver, raw, project, queue, delayed):
    """The commands of a claim on ``queue`` with ``delayed`` messages due
    in 10 minutes ahead of the one it takes (its script loaded before)."""
    driver.queue_controller.create(
        queue, metadata={'_default_message_delay': 600}, project=project)
    for start in range(0, delayed, 100):
        driver.message_controller.post(
            queue, [{'ttl': 900, 'body': n}
                    for n in range(start, start + 100)], CLIENT,
            project=project)
    post(driver, queue, project, 'ready', delay=0)
    claim(driver, queue, project)
    post(driver, queue, project, 'ready too', delay=0)
    got = []
    commands = monitored(raw, lambda: got.append(
        claim(driver, queue, project)[1]))
    assert [m['body'] for m in got[0]] == ['ready too']
    return commands


def test_a_claim_reads_only_what_is_due_of_the_delayed_index(
        driver, raw, project):
    """SPEC 3: a claim never reads a delayed message before it is due,
    whatever their number. Every command a claim sends, its script's
    included, that touches the queue's delayed index asks only for what
    is due (scores up to now), a batch at most, or removes what it
    moves; and the claim sends as many commands behind 1,000 delayed
    messages as behind none."""
    none = claim_behind(driver, raw, project, 'empty', 0)
    commands = claim_behind(driver, raw, project, 'q', 1000)
    now_ms = raw.time()[0] * 1000
    index = keys.queue_prefix('q', project) + ':delayed'
    on_index = [c for c in commands if index in c]
    assert on_index, commands
    for command in on_index:
        name = command[0].upper()
        if name == 'ZRANGEBYSCORE':
            assert command[2] == '-inf' and 'LIMIT' in command, command
            assert float(command[3]) <= now_ms + 1000, command
        else:
            assert name in ('ZREM', 'ZADD'), command
    assert len(commands) == len(none), (commands, none)


def message_hash_reads(raw):
    stats = raw.info('commandstats')
    return sum(stats.get('cmdstat_' + c, {}).get('calls', 0)
               for c in ('hmget', 'hget', 'hgetall'))


def test_a_claim_does_not_read_blocked_group_members(driver, raw, project):
    # SPEC §4: blocked groups are skipped at no extra cost. 1,000 members
    # wait behind a claimed head; the claim reads the one free head.
    driver.queue_controller.create(
        'q', metadata={'_message_group_key': 'g'}, project=project)
    for start in range(0, 1000, 100):
        driver.message_controller.post('q', [
            {'ttl': 900, 'body': {'g': 'busy', 'n': n}}
            for n in range(start, start + 100)], CLIENT, project=project)
    assert [m['body']['n'] for m in claim(driver, 'q', project)[1]] == [0]
    post(driver, 'q', project, {'g': 'free', 'n': 0})
    raw.config_resetstat()
    assert [m['body']['g'] for m in claim(driver, 'q', project)[1]] == [
        'free']
    reads = message_hash_reads(raw)
    assert reads <= 3, 'claim read %d message hashes' % reads


def test_groups_pinned_to_another_client_cost_a_claim_nothing(
        driver, raw, project):
    # SPEC §4, sticky: 30 groups whose heads are pinned to bob; alice's
    # claim reads the one head free for her.
    driver.queue_controller.create('q', metadata={
        '_message_group_key': 'g', '_message_group_sticky': 600},
        project=project)
    driver.message_controller.post('q', [
        {'ttl': 900, 'body': {'g': 'g%d' % g, 'n': n}}
        for g in range(30) for n in range(2)], CLIENT, project=project)
    with sticky.acting_as('bob'):
        # Bob takes every group's first message (two claims, one message
        # per group each) and deletes them: the second ones are his.
        taken = [claim(driver, 'q', project, limit=15) for _ in range(2)]
        for claim_id, got in taken:
            assert len(got) == 15
            for message in got:
                driver.message_controller.delete(
                    'q', message['id'], project=project, claim=claim_id)
    post(driver, 'q', project, {'g': 'free', 'n': 0})
    raw.config_resetstat()
    with sticky.acting_as('alice'):
        got = claim(driver, 'q', project)[1]
    assert [m['body']['g'] for m in got] == ['free']
    reads = message_hash_reads(raw)
    assert reads <= 3, 'claim read %d message hashes' % reads


def test_a_posted_message_goes_into_four_indexes(driver, raw, project):
    # README, Performance: all messages, unclaimed, expiry, and claimable
    # or delayed (by due time, the member prefixed with its position).
    driver.queue_controller.create(
        'q', metadata={'_default_message_delay': 600}, project=project)
    now_id, = post(driver, 'q', project, 'now', delay=0)
    later_id, = post(driver, 'q', project, 'later')
    prefix = keys.queue_prefix('q', project) + ':'

    def indexes_holding(message_id):
        found = set()
        for suffix in keys.QUEUE_KEY_SUFFIXES:
            key = prefix + suffix
            if raw.type(key) != b'zset':
                continue
            members = [m.decode() for m in raw.zrange(key, 0, -1)]
            if any(m == message_id or m.endswith(':' + message_id)
                   for m in members):
                found.add(suffix)
        return found

    assert indexes_holding(now_id) == {'msgs', 'free', 'expiry', 'avail'}
    assert indexes_holding(later_id) == {'msgs', 'free', 'expiry',
                                         'delayed'}


def test_a_retried_post_does_not_duplicate(driver, project):
    driver.queue_controller.create('q', project=project)
    args = [CLIENT.hex, 'fixed-id', 60, 0, json.dumps('once'), '', '', 0]
    factories_redis.retried_post(driver, 'q', project, *args)
    factories_redis.retried_post(driver, 'q', project, *args)
    assert [m['body'] for m in listed(driver, 'q', project)] == ['once']


def test_gc_finishes_an_interrupted_dead_letter_move_exactly_once(
        driver, project, clock):
    driver.queue_controller.create('dlq', project=project)
    driver.queue_controller.create(
        'q', metadata={'_max_claim_count': 1, '_dead_letter_queue': 'dlq'},
        project=project)
    mid = post(driver, 'q', project, 'poison')[0]
    claim(driver, 'q', project, ttl=60)
    clock.advance(60)
    # The claim script moves the message to the outbox; the process "dies"
    # before copying it into the dead-letter queue.
    _, flat, dead, _ = driver.run_script('claim', 'q', project, 'c', 60, 0,
                                         10, 1, 'dlq', 0, 'claim', '',
                                         driver.retry_span_ms,
                                         driver.deleted_id_memory_ms)
    assert [d.decode() for d in dead] == [mid] and flat == []
    assert listed(driver, 'dlq', project) == []
    clock.advance(61)
    driver.gc()
    driver.gc()
    assert [m['id'] for m in listed(driver, 'dlq', project)] == [mid]
    assert listed(driver, 'q', project, include_claimed=True) == []


def test_gc_removes_everything_expired(driver, raw, project, clock):
    driver.queue_controller.create(
        'q', metadata={'_default_message_delay': 100}, project=project)
    post(driver, 'q', project, *range(50), ttl=60)
    clock.advance(61)
    driver.gc()
    # The queue stays, and with it its metadata copy (metadata.py).
    remaining = [k for k in ours(raw, project)
                 if not k.endswith((':seq', ':claims', ':meta', ':metagen'))]
    assert remaining == []


def test_gc_frees_the_groups_of_a_sticky_client_gone_idle(driver, raw,
                                                           project, clock):
    from zaqar_delay import sticky
    driver.queue_controller.create('q', metadata={
        '_message_group_key': 'g', '_message_group_sticky': 60},
        project=project)
    post(driver, 'q', project, {'g': 'a'}, {'g': 'a'})
    with sticky.acting_as('alice'):
        claim_id, got = claim(driver, 'q', project)
        driver.message_controller.delete('q', got[0]['id'], project=project,
                                         claim=claim_id)
    pins = keys.queue_prefix('q', project) + ':pin'
    assert raw.hlen(pins) == 1
    clock.advance(60)
    driver.gc()
    assert raw.hlen(pins) == 0
    assert [k for k in ours(raw, project) if ':pa:' in k or ':pg:' in k
            or k.endswith(':pseen')] == []


def test_an_idle_clients_waiting_group_is_freed_before_its_stale_pins(
        driver, raw, project, clock):
    # Alice took 1,000 groups that emptied since (a pin outlives its
    # group) and 'live', whose head came back to her own index when her
    # claim lapsed while she was active. Once she is idle, Bob's first
    # claim gets it: the sweep frees groups with a waiting head first,
    # not 100 of her 1,001 pins at random.
    driver.queue_controller.create('q', metadata={
        '_message_group_key': 'g', '_message_group_sticky': 60},
        project=project)
    with sticky.acting_as('alice'):
        for start in range(0, 1000, 100):
            post(driver, 'q', project, *[{'g': 'e%d' % n}
                                         for n in range(start, start + 100)])
            claim_id, got = claim(driver, 'q', project, limit=100)
            driver.message_controller.bulk_delete(
                'q', [m['id'] for m in got], project=project,
                claim_ids=[claim_id])
        post(driver, 'q', project, {'g': 'live'})
        claim(driver, 'q', project, limit=1, ttl=30)
    clock.advance(31)
    with sticky.acting_as('bob'):
        assert claim(driver, 'q', project, limit=1) == (None, [])
    pinned_avail = keys.queue_prefix('q', project) + ':pa:alice'
    assert raw.zcard(pinned_avail) == 1
    assert raw.hlen(keys.queue_prefix('q', project) + ':pin') == 1001
    clock.advance(60)
    with sticky.acting_as('bob'):
        got = claim(driver, 'q', project, limit=1)[1]
    assert [m['body'] for m in got] == [{'g': 'live'}]


def test_unreachable_redis_raises_zaqars_connection_error(conf, redis_url):
    from zaqar_delay.drivers.redis import driver as redis_driver
    from localstack.redis_server import free_port
    conf.set_override('uri', 'delay.redis://127.0.0.1:%d' % free_port(),
                      group='drivers:message_store:delay.redis')
    conf.set_override('max_reconnect_attempts', 1,
                      group='drivers:message_store:delay.redis')
    conf.set_override('reconnect_sleep', 0.01,
                      group='drivers:message_store:delay.redis')
    data_driver = redis_driver.DataDriver(
        conf, None, backends.control_driver(conf, redis_url))
    # Created while the data store was up (a create forgets the queue's
    # metadata copy there first: it fails too while the store is down).
    backends.control_driver(conf, redis_url).queue_controller.create(
        'q', project='p')
    with pytest.raises(storage_errors.ConnectionError):
        data_driver.queue_controller.create('q', project='p')
    with pytest.raises(storage_errors.ConnectionError):
        post(data_driver, 'q', 'p', 'x')
    assert data_driver.is_alive() is False


def test_uri_forms(conf):
    from zaqar_delay.drivers.redis import connection
    tcp = connection.client_from_uri('delay.redis://:s%40cret@h:7000/3', 1)
    kwargs = tcp.connection_pool.connection_kwargs
    assert (kwargs['host'], kwargs['port'], kwargs['db'],
            kwargs['password']) == ('h', 7000, 3, 's@cret')
    unix = connection.client_from_uri('redis:///run/redis.sock?db=2', 1)
    assert unix.connection_pool.connection_kwargs['path'] == '/run/redis.sock'
    with pytest.raises(ValueError, match='delay.redis://'):
        connection.client_from_uri('mongodb://x', 1)


def test_claim_ids_are_fresh_uuids(driver, project):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a', 'b')
    first, _ = claim(driver, 'q', project, limit=1)
    second, _ = claim(driver, 'q', project, limit=1)
    assert first != second and uuid.UUID(first) and uuid.UUID(second)


def test_ended_claims_leave_the_claim_index_without_gc(driver, raw, project,
                                                       clock):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, *range(5))
    for _ in range(5):
        claim(driver, 'q', project, limit=1, ttl=60)
    claims_key = keys.queue_keys('q', project)[6]
    assert raw.zcard(claims_key) == 5
    clock.advance(60)
    claim(driver, 'q', project, limit=1)
    assert raw.zcard(claims_key) == 1


def test_every_key_the_driver_writes_starts_with_zd(redis_url, project):
    # The driver alone on database 3 (Zaqar's control driver, which keeps
    # queue metadata, on 0): whatever it writes there is its own.
    group = 'drivers:message_store:delay.redis'
    uri = redis_url.replace('redis://', 'delay.redis://').rsplit('/', 1)[0]
    conf = backends.make_conf(**{group: {'uri': uri + '/3'}})
    driver = redis_driver.DataDriver(conf, None,
                                     backends.control_driver(conf, redis_url))
    store = redis_py.Redis.from_url(redis_url.rsplit('/', 1)[0] + '/3')
    store.flushdb()
    messages = driver.message_controller
    driver.queue_controller.create(
        'grouped', metadata={'_message_group_key': 'g',
                             '_max_claim_count': 1,
                             '_dead_letter_queue': 'dead'}, project=project)
    driver.queue_controller.create('dead', project=project)
    driver.queue_controller.create('moved', project=project)
    driver.queue_controller.create(
        'short', metadata={'_retention': {'length': 1}}, project=project)
    post(driver, 'short', project, 'old', 'new')
    driver.clean_queue('short', project)
    driver.subscription_controller.create(
        'grouped', 'cursor:' + str(uuid.uuid4()), 3600, {}, project=project)
    post(driver, 'grouped', project, *[{'g': n % 3, 'n': n}
                                       for n in range(8)])
    claim_id, got = claim(driver, 'grouped', project, limit=1, ttl=60)
    messages.delete('grouped', got[0]['id'], project, claim=claim_id)
    messages.move_group('grouped', 2, 'moved', project=project)
    messages.purge_group('moved', 2, project=project)
    clock = backends.FakeClock()
    driver.use_clock(clock)
    claim(driver, 'grouped', project, limit=5, ttl=60)
    listed(driver, 'grouped', project)
    clock.advance(61)
    # Claimed once already: these go to the dead-letter queue.
    claim(driver, 'grouped', project, limit=5, ttl=60)
    messages.pop('dead', 1, project=project)
    driver.gc()
    assert listed(driver, 'dead', project)
    found = [k.decode() for k in store.keys('*')]
    assert found and all(k.startswith('zd:') for k in found), found
    # Every key but gc's registry and the layout version belongs to one
    # queue's hash tag.
    assert {k for k in found if '{' not in k} == {keys.QUEUE_REGISTRY,
                                                  layout.LAYOUT_KEY}
    # The workload reached the key types the features write.
    for part in (':m:', ':g:', ':cons:', ':s:', ':deleted', ':removed',
                 ':r:'):
        assert any(part in k for k in found), part
    driver.close()
