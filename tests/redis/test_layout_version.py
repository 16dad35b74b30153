"""The Redis layout version (``zd:layout``): written into an empty store,
checked at the driver's first call, a newer one refused, an older one
refused until ``zaqar-delay-migrate --upgrade-layout`` (batched,
idempotent) files the messages earlier versions left out of ``Q:free``.

Each test has a redis-server of its own: the version key is global."""

import io
import uuid

import pytest
import redis as redis_py

from localstack import backends
from tests.contract.helpers import claim, post
from localstack import zaqar_server
from zaqar_delay import errors
from zaqar_delay.drivers.redis import driver as redis_driver
from zaqar_delay.drivers.redis import keys
from zaqar_delay.drivers.redis import layout
from zaqar_delay.migrate import cli


@pytest.fixture
def raw(own_redis):
    return redis_py.Redis.from_url(own_redis.url)


@pytest.fixture
def make_driver(own_redis, request):
    def make():
        conf = backends.make_conf(**{'drivers:message_store:delay.redis': {
            'uri': own_redis.url.replace('redis://', 'delay.redis://')}})
        data = redis_driver.DataDriver(
            conf, None, backends.control_driver(conf, own_redis.url))
        request.addfinalizer(data.close)
        return data
    return make


@pytest.fixture
def upgrade(own_redis, tmp_path, monkeypatch):
    """Run ``zaqar-delay-migrate --upgrade-layout``: (status, output)."""
    monkeypatch.setattr(cli.logging, 'setup', lambda *a: None)
    config = zaqar_server.write_config(
        str(tmp_path), own_redis.url, 0, 'delay.redis',
        {'uri': own_redis.url.replace('redis://', 'delay.redis://')})

    def run(*extra):
        out = io.StringIO()
        code = cli.main(['--config-file', config, '--upgrade-layout',
                         *extra], out=out)
        return code, out.getvalue()
    return run


def test_an_empty_store_gets_the_current_version(make_driver, raw):
    assert raw.get(layout.LAYOUT_KEY) is None
    make_driver().queue_controller.create('q', project='p')
    make_driver().message_controller.stats('q', 'p')
    assert int(raw.get(layout.LAYOUT_KEY)) == layout.CURRENT


def test_a_newer_layout_is_refused(make_driver, raw):
    raw.set(layout.LAYOUT_KEY, layout.CURRENT + 1)
    driver = make_driver()
    with pytest.raises(errors.LayoutMismatch,
                       match='version {}.*newer'.format(layout.CURRENT + 1)):
        driver.message_controller.stats('q', 'p')
    assert int(raw.get(layout.LAYOUT_KEY)) == layout.CURRENT + 1


def test_the_upgrade_refuses_a_newer_layout_too(raw, upgrade):
    raw.set(layout.LAYOUT_KEY, layout.CURRENT + 1)
    with pytest.raises(SystemExit, match='newer'):
        upgrade()


def make_version_1(make_driver, raw, count):
    """A queue as a version before retention left it: ``count`` messages,
    one of them claimed, none in Q:free, and no version key."""
    driver = make_driver()
    project = 'p-' + uuid.uuid4().hex[:6]
    driver.queue_controller.create('q', project=project)
    ids = post(driver, 'q', project, *range(count))
    claim(driver, 'q', project, limit=1)
    free_key = keys.queue_prefix('q', project) + ':free'
    raw.delete(free_key, layout.LAYOUT_KEY)
    return project, ids, free_key


def test_an_old_layout_is_refused_then_upgraded_in_batches(
        make_driver, raw, upgrade, monkeypatch):
    project, ids, free_key = make_version_1(make_driver, raw, 7)
    with pytest.raises(errors.LayoutMismatch,
                       match='version 1 .*--upgrade-layout'):
        make_driver().message_controller.stats('q', project)
    assert raw.get(layout.LAYOUT_KEY) is None

    batches = []
    real_run = redis_driver.DataDriver.run_script

    def counted(self, name, *args, **kwargs):
        batches.append(name)
        return real_run(self, name, *args, **kwargs)
    monkeypatch.setattr(layout, 'UPGRADE_BATCH', 3)
    monkeypatch.setattr(redis_driver.DataDriver, 'run_script', counted)
    code, out = upgrade()
    assert code == 0, out
    assert 'upgraded from version 1 to {} (1 queues)'.format(
        layout.CURRENT) in out
    # 7 messages, 3 a call: three calls, the last one short.
    assert batches.count('layout_free') == 3
    monkeypatch.undo()

    # Every message but the claimed one, by position, as post.lua files.
    positions = dict(raw.zrange(keys.queue_prefix('q', project) + ':msgs',
                                0, -1, withscores=True))
    free = dict(raw.zrange(free_key, 0, -1, withscores=True))
    assert sorted(m.decode() for m in free) == sorted(ids[1:])
    assert all(free[m] == positions[m] for m in free)
    driver = make_driver()
    stats = driver.message_controller.stats('q', project)['messages']
    assert (stats['free'], stats['claimed']) == (6, 1)


def test_the_upgrade_run_again_changes_nothing(make_driver, raw, upgrade):
    project, ids, free_key = make_version_1(make_driver, raw, 3)
    assert upgrade()[0] == 0
    before = raw.zrange(free_key, 0, -1, withscores=True)
    code, out = upgrade()
    assert code == 0
    assert 'nothing to upgrade' in out
    assert raw.zrange(free_key, 0, -1, withscores=True) == before
    assert make_driver().message_controller.stats(
        'q', project)['messages']['free'] == 2


@pytest.mark.parametrize('move_option', [
    ['--dry-run'], ['--delete-source'], ['--queue', 'q'],
    ['--source-uri', 'redis://127.0.0.1:1'], ['--project-id', 'p'],
    ['--pool', 'pa'], ['--pool-source', 'pa=redis://127.0.0.1:1']])
def test_the_upgrade_with_a_moves_option_is_refused_and_changes_nothing(
        make_driver, raw, upgrade, move_option):
    """--dry-run promises to change nothing, yet with --upgrade-layout
    the upgrade ran; the move's other options were ignored silently."""
    make_version_1(make_driver, raw, 3)
    with pytest.raises(SystemExit, match='--upgrade-layout takes none of '
                       "the move's options: " + move_option[0]):
        upgrade(*move_option)
    assert raw.get(layout.LAYOUT_KEY) is None
