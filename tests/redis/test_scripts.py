"""Redis: how the Lua scripts are built (prelude.py) and sent (scripts.py)."""

import pytest
import redis as redis_py

from tests.contract.helpers import CLIENT, claim, listed, post
from zaqar_delay.drivers.redis import prelude
from zaqar_delay.drivers.redis import scripts

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


def test_connections_killed_between_calls_are_replaced_unnoticed(
        driver, project, raw):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'before')
    killed = raw.client_kill_filter(_type='normal', skipme=True)
    assert killed >= 1
    post(driver, 'q', project, 'after')
    assert [m['body'] for m in listed(driver, 'q', project)] == [
        'before', 'after']
    assert raw.info('clients')['connected_clients'] >= 2


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
