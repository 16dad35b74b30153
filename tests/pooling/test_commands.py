"""The operator commands with pooling: ``zaqar-delay-gc`` reaches every
pool's driver (Zaqar's pooling driver hands ``gc()`` to a pipeline that
drops it) and a pool that is down does not stop gc of the others;
``zaqar-delay-groups`` works on the pool the queue is catalogued on."""

import io
import json
import time

import pytest
import redis as redis_py

from tests.contract.helpers import post
from localstack import pooling_catalog as pooled
from localstack.pooling_catalog import delay_uri
from localstack.redis_server import free_port
from zaqar_delay.cmd import gc as gc_command
from zaqar_delay.cmd import groups as groups_command


@pytest.fixture
def pooled_config(tmp_path, monkeypatch):
    """(zaqar.conf path, control driver, catalogue) of a pooled Zaqar."""
    # Keep pytest's log capture: oslo.log would replace its handler.
    # (Both commands use oslo_log's one module object.)
    monkeypatch.setattr(gc_command.logging, 'setup', lambda *a: None)
    return pooled.pooled_config(tmp_path)


def expired_message(catalog, control, project, queue, pool):
    pooled.place(control, queue, project, pool)
    driver = catalog.lookup(queue, project)
    post(driver, queue, project, 'short', ttl=1)


def message_keys(url, project, queue):
    return redis_py.Redis.from_url(url).keys(
        '*{%s/%s}*:m:*' % (project, queue))


def test_gc_reaches_every_pool_and_skips_one_that_is_down(
        pooled_config, redis_url, second_redis_url, project, caplog):
    path, control, catalog = pooled_config
    urls = {'a': redis_url, 'b': second_redis_url}
    for pool, url in urls.items():
        control.pools_controller.create(pool, 100, delay_uri(url))
        expired_message(catalog, control, project, 'q-' + pool, pool)
    # Listed between a and b: gc must go on to b after it fails.
    control.pools_controller.create(
        'a-down', 100, 'delay.redis://127.0.0.1:%d/0' % free_port(),
        options={'max_reconnect_attempts': 0})
    time.sleep(1.1)
    before = {pool: message_keys(url, project, 'q-' + pool)
              for pool, url in urls.items()}
    assert all(before.values()), before
    assert gc_command.main(['--config-file', path, '--once']) == 1
    for pool, url in urls.items():
        assert message_keys(url, project, 'q-' + pool) == [], pool
    assert 'gc of pool a-down failed' in caplog.text


def test_groups_command_works_on_the_queues_pool(
        pooled_config, redis_url, second_redis_url, project):
    path, control, catalog = pooled_config
    for pool, url in (('a', redis_url), ('b', second_redis_url)):
        control.pools_controller.create(pool, 100, delay_uri(url))
    pooled.place(control, 'carts', project, 'b', {'_message_group_key': 'g'})
    post(catalog.lookup('carts', project), 'carts', project,
         {'g': 'c1'}, {'g': 'c1'}, {'g': 'c2'})

    def groups(*args):
        out = io.StringIO()
        code = groups_command.main(['--config-file', path, *args], out=out)
        return code, out.getvalue()

    code, listed = groups('list', project, 'carts')
    assert code == 0
    assert [json.loads(line)['id'] for line in listed.splitlines()] == [
        'c1', 'c2']
    assert groups('purge', project, 'carts', 'c1') == (
        0, 'purged 2 messages\n')
    assert groups('list', project, 'nowhere')[0] == 1
