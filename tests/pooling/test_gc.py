"""``zaqar-delay-gc`` with pooling reaches every pool's driver (Zaqar's
pooling driver hands ``gc()`` to a pipeline that drops it), and a pool that
is down does not stop gc of the others."""

import time

import pytest
import redis as redis_py

from tests.contract.helpers import post
from tests.pooling import catalog as pooled
from tests.pooling.catalog import delay_uri
from tests.servers.redis_server import free_port
from zaqar_delay.cmd import gc as gc_command

CONFIG = """[DEFAULT]
pooling = true

[drivers]
message_store = delay.redis
management_store = sqlalchemy

[drivers:management_store:sqlalchemy]
uri = sqlite:///{database}
"""


@pytest.fixture
def gc(tmp_path, monkeypatch):
    conf, control, catalog = pooled.make_catalog(tmp_path, 'delay.redis')
    path = tmp_path / 'zaqar.conf'
    path.write_text(CONFIG.format(database=tmp_path / 'zaqar.db'))
    # Keep pytest's log capture: oslo.log would replace its handler.
    monkeypatch.setattr(gc_command.logging, 'setup', lambda *a: None)
    return (lambda: gc_command.main(['--config-file', str(path), '--once']),
            control, catalog)


def expired_message(catalog, control, project, queue, pool):
    pooled.place(control, queue, project, pool)
    driver = catalog.lookup(queue, project)
    post(driver, queue, project, 'short', ttl=1)


def message_keys(url, project, queue):
    return redis_py.Redis.from_url(url).keys(
        '*{%s/%s}*:m:*' % (project, queue))


def test_gc_reaches_every_pool_and_skips_one_that_is_down(
        gc, redis_url, second_redis_url, project, caplog):
    run, control, catalog = gc
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
    assert run() == 1
    for pool, url in urls.items():
        assert message_keys(url, project, 'q-' + pool) == [], pool
    assert 'gc of pool a-down failed' in caplog.text
