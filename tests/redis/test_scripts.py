"""Redis: how the Lua scripts are built (prelude.py) and sent
(scripts.py, sending.py)."""

import os
import time

import pytest
import redis as redis_py
from redis import connection as redis_connection

from tests.contract.helpers import CLIENT, claim, listed, post
from zaqar_delay.drivers.redis import prelude
from zaqar_delay.drivers.redis import scripts
from zaqar_delay.drivers.redis import sending

# A prelude in five statements; each keeps the comment lines above it.
KEY_NAMES = """\
-- Key names.
local Q = ARGV[1]
local function key(id) return Q .. ':' .. id end

"""
READ = """\
-- Reads one message.
local function read(id)
  return redis.call('GET', key(id))
end
"""
UNUSED = """\
local function unused(id)
  -- read(id) is only named in this comment
  return redis.call('DEL', id)
end
"""
CLOCK = "local NOW = 1\n"
ORPHAN = """\
-- Called by nothing.
local function orphan()
  return unused(NOW)
end
"""
SHARED = KEY_NAMES + READ + UNUSED + CLOCK + ORPHAN


@pytest.fixture
def raw(redis_url):
    return redis_py.Redis.from_url(redis_url)


def test_the_prelude_splits_into_whole_top_level_statements():
    parts = prelude.blocks(scripts.COMMON)
    assert ''.join(text for _, text in parts) == scripts.COMMON
    functions = [(name, text) for name, text in parts if name]
    assert len(functions) == scripts.COMMON.count('\nlocal function ')
    for name, text in functions:
        code = [line for line in text.splitlines()
                if line.strip() and not line.lstrip().startswith('--')]
        assert code[0].startswith('local function ' + name + '(')
        assert code[-1].rstrip().endswith('end'), name


def test_a_script_keeps_the_functions_it_reaches_with_their_comments():
    trimmed = prelude.for_script(SHARED, "return read(ARGV[3])\n")
    # read() reached from the script, key() through read(); every
    # statement that defines no function is kept, in order.
    assert trimmed == KEY_NAMES + READ + CLOCK


def test_a_name_in_a_comment_line_reaches_nothing():
    trimmed = prelude.for_script(SHARED, "-- orphan() is not called\n"
                                         "return 1\n")
    assert 'function orphan' not in trimmed
    assert 'function unused' not in trimmed
    assert 'function read' not in trimmed


def test_each_queue_script_leaves_out_what_it_never_calls(raw):
    delete = scripts.source('delete')
    assert 'local function detach(' in delete
    assert 'local function bury(' in delete
    # Claims and retention have nothing to do with a delete.
    assert 'local function sticky_claim(' not in delete
    assert 'local function trim(' not in delete
    assert 'local function sticky_claim(' in scripts.source('claim')
    for name in scripts.QUEUE_SCRIPTS:
        # Each one compiles: no statement was cut in half.
        raw.script_load(scripts.source(name))


def test_hot_calls_send_their_scripts_past_the_command_layer(
        driver, project, monkeypatch):
    driver.queue_controller.create('q', project=project)
    sent = []
    command_layer = redis_py.Redis.execute_command

    def recording(self, *args, **options):
        sent.append(args[0])
        return command_layer(self, *args, **options)

    monkeypatch.setattr(redis_py.Redis, 'execute_command', recording)
    post(driver, 'q', project, 'a', 'b')
    claim_id, messages = claim(driver, 'q', project)
    for message in messages:
        driver.message_controller.delete('q', message['id'], project=project,
                                         claim=claim_id)
    assert len(messages) == 2
    assert 'EVALSHA' not in sent and 'EVAL' not in sent
    assert listed(driver, 'q', project) == []


def test_a_server_that_lost_its_scripts_is_given_them_again(
        driver, project, raw):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'before')
    raw.script_flush()  # as a restarted server without persistence would
    post(driver, 'q', project, 'after')
    assert [m['body'] for m in listed(driver, 'q', project)] == [
        'before', 'after']


def _warm(driver, project):
    """Load the post, claim and delete scripts (their first call meets
    NOSCRIPT and goes through redis-py's Script, which loads them)."""
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'warm-up')
    claim_id, (message,) = claim(driver, 'q', project)
    driver.message_controller.delete('q', message['id'], project=project,
                                     claim=claim_id)


def _count_pool_checkouts(driver, monkeypatch):
    pool = driver.connection.connection_pool
    taken = []
    take = pool.get_connection

    def counting():
        taken.append(1)
        return take()

    monkeypatch.setattr(pool, 'get_connection', counting)
    return taken


def test_calls_keep_one_connection_instead_of_the_pool_each_time(
        driver, project, monkeypatch):
    _warm(driver, project)
    taken = _count_pool_checkouts(driver, monkeypatch)
    for n in range(6):
        post(driver, 'q', project, n)
    claim_id, messages = claim(driver, 'q', project)
    for message in messages:
        driver.message_controller.delete('q', message['id'], project=project,
                                          claim=claim_id)
    assert len(messages) == 6
    assert taken == []


def test_a_call_that_finds_the_connection_busy_takes_one_from_the_pool(
        driver, project, monkeypatch):
    _warm(driver, project)
    taken = _count_pool_checkouts(driver, monkeypatch)
    held = driver.scripts._held
    # As if another thread's call were on it.
    with held._lock:
        post(driver, 'q', project, 'while busy')
    assert taken == [1]
    assert [m['body'] for m in listed(driver, 'q', project)] == [
        'while busy']


def test_a_connection_closed_while_idle_is_replaced_without_a_retry(
        driver, project, raw, monkeypatch):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'before')
    # The server (or a proxy's idle timeout) closes it between calls.
    assert raw.client_kill_filter(_type='normal', skipme=True) >= 1
    monkeypatch.setattr(sending, 'IDLE_CHECK_S', 0)
    scripts_sent = []
    send = redis_connection.AbstractConnection.send_packed_command

    def recording(self, command, check_health=True):
        packed = b''.join(command) if isinstance(command, list) else command
        if b'EVALSHA' in packed:
            scripts_sent.append(packed)
        return send(self, command, check_health)

    monkeypatch.setattr(redis_connection.AbstractConnection,
                        'send_packed_command', recording)
    post(driver, 'q', project, 'after')
    # Each script once, on a new connection: none was tried on the dead
    # one first and retried.
    assert scripts_sent
    assert len(set(scripts_sent)) == len(scripts_sent)
    assert [m['body'] for m in listed(driver, 'q', project)] == [
        'before', 'after']


def test_connections_killed_between_busy_calls_are_replaced_unnoticed(
        driver, project, raw):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'before')
    # Killed within IDLE_CHECK_S of the last call: the post finds the
    # connection closed when it reads, and the driver's retry posts it
    # once on a new connection.
    assert raw.client_kill_filter(_type='normal', skipme=True) >= 1
    post(driver, 'q', project, 'after')
    assert [m['body'] for m in listed(driver, 'q', project)] == [
        'before', 'after']


class _KeepsItsSocketOnErrors(redis_py.Connection):
    """As redis-py's SentinelManagedConnection: a read that fails leaves
    the connection connected, whatever it has not read yet."""

    def read_response(self, *args, disconnect_on_error=False, **kwargs):
        return super().read_response(
            *args, disconnect_on_error=disconnect_on_error, **kwargs)


# Busy for 500 ms inside Redis, then answers.
SLOW = """
local function ms() local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000) end
local start = ms()
while ms() - start < 500 do end
return 'slow'
"""


def test_a_call_cut_short_leaves_no_half_reply_for_the_next(
        redis_url, monkeypatch):
    monkeypatch.setattr(sending, 'IDLE_CHECK_S', 3600)  # no poll between
    pool = redis_py.ConnectionPool.from_url(
        redis_url, socket_timeout=0.1,
        connection_class=_KeepsItsSocketOnErrors)
    client = redis_py.Redis(connection_pool=pool)
    slow, echo = client.script_load(SLOW), client.script_load(
        'return ARGV[1]')
    held = sending.HeldConnection(pool)
    with pytest.raises(redis_py.TimeoutError):
        held.evalsha(slow, ('k',), [])
    time.sleep(0.7)  # the slow reply has come by now
    assert held.evalsha(echo, ('k',), ['mine']) == b'mine'
    pool.disconnect()


def test_a_forked_child_uses_a_connection_of_its_own(driver, project):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'parent before')
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports by exit code
        code = 1
        try:
            ids = [post(driver, 'q', project, 'child %d' % n)[0]
                   for n in range(20)]
            got = driver.message_controller.bulk_get('q', ids,
                                                     project=project)
            code = 0 if [m['body'] for m in got] == [
                'child %d' % n for n in range(20)] else 1
        finally:
            os._exit(code)
    parent_ids = [post(driver, 'q', project, 'parent %d' % n)[0]
                  for n in range(20)]
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    got = driver.message_controller.bulk_get('q', parent_ids,
                                             project=project)
    assert [m['body'] for m in got] == ['parent %d' % n for n in range(20)]
    assert len(listed(driver, 'q', project)) == 41


def test_a_child_forked_during_a_call_keeps_a_connection_of_its_own(
        driver, project):
    # Tried: fork while another thread's call holds the kept connection
    # (its lock, here held by the test). The child has no such thread:
    # its calls must not all fall back to a pooled connection each.
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'warm-up')
    held = driver.scripts._held
    assert held._lock.acquire(blocking=False)
    try:
        child = os.fork()
        if child == 0:  # pragma: no cover - the child reports by exit code
            code = 1
            try:
                post(driver, 'q', project, 'child')
                code = 0 if (held._conn is not None
                             and not held._lock.locked()) else 1
            finally:
                os._exit(code)
    finally:
        held._lock.release()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert [m['body'] for m in listed(driver, 'q', project)] == [
        'warm-up', 'child']


def test_a_delete_reads_no_body(driver, project, raw):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'x' * 1000, client=CLIENT)
    claim_id, (message,) = claim(driver, 'q', project)
    raw.config_resetstat()
    driver.message_controller.delete('q', message['id'], project=project,
                                     claim=claim_id)
    stats = raw.info('commandstats')
    # One HMGET of the fields that decide the delete; the index removal
    # reuses them instead of reading the hash again.
    assert stats['cmdstat_hmget']['calls'] == 1
    assert listed(driver, 'q', project) == []
