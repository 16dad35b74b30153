"""zaqar-delay-migrate with pooling: two pools (sqlalchemy management
store, each pool on its own redis-server), each moved from the old store
named for it with --pool-source into the store the pool is registered
with; the catalogue decides which queues are whose; --pool picks pools;
a bad selection is refused before anything moves."""

import io

import pytest

from localstack import backends
from tests.contract.helpers import listed
from tests.migrate.conftest import zaqar_post
from localstack import pooling_catalog as pooled
from zaqar_delay.migrate import cli


@pytest.fixture
def pools(tmp_path, own_redis, redis_url, monkeypatch):
    """(zaqar.conf, control, catalogue, {pool: its redis URL}); pool pa
    on the module's redis-server, pb on the session's."""
    # Keep pytest's log capture: oslo.log would replace its handler.
    monkeypatch.setattr(cli.logging, 'setup', lambda *a: None)
    path, control, catalog = pooled.pooled_config(tmp_path)
    urls = {'pa': own_redis.url, 'pb': redis_url}
    for pool, url in urls.items():
        control.pools_controller.create(pool, 100, pooled.delay_uri(url))
    return path, control, catalog, urls


def zaqar_redis(url, control):
    """Zaqar's own Redis data driver on ``url``: a pool's old store."""
    from zaqar.storage.redis import driver
    return driver.DataDriver(backends.make_conf(**{
        'drivers:message_store:redis': {'uri': url}}), None, control)


def migrate(path, *argv):
    out = io.StringIO()
    code = cli.main(['--config-file', path, *argv], out=out)
    return code, out.getvalue()


def filled(control, urls, project):
    """Queues qa1, qa2 on pool pa, qb on pb, each with two messages in
    its pool's old store: {queue: ids}."""
    posted = {}
    for queue, pool in (('qa1', 'pa'), ('qa2', 'pa'), ('qb', 'pb')):
        pooled.place(control, queue, project, pool)
        posted[queue] = zaqar_post(zaqar_redis(urls[pool], control), queue,
                                   project, [queue + '-1', queue + '-2'])
    return posted


def test_each_pool_moves_into_its_own_store(pools, project):
    path, control, catalog, urls = pools
    posted = filled(control, urls, project)
    code, out = migrate(path, '--project-id', project,
                        '--pool-source', 'pa=' + urls['pa'],
                        '--pool-source', 'pb=' + urls['pb'])
    assert code == 0, out
    assert 'pool pa:\n2 queues, 4 messages in the source' in out
    assert 'pool pb:\n1 queues, 2 messages in the source' in out
    for queue, ids in posted.items():
        # Where Zaqar's pooling routes the queue now: its pool's store.
        moved = listed(catalog.lookup(queue, project), queue, project)
        assert [(m['id'], m['body']) for m in moved] == [
            (ids[0], queue + '-1'), (ids[1], queue + '-2')]
    # And nothing of pa's queues went to pb's store.
    assert listed(catalog.get_driver('pb'), 'qa1', project) == []


def test_pool_picks_one_pool_of_every_project(pools, project):
    path, control, catalog, urls = pools
    filled(control, urls, project)
    filled(control, urls, project + '-other')
    # Without --project-id: every project of the SQL management store.
    code, out = migrate(path, '--pool', 'pb',
                        '--pool-source', 'pb=' + urls['pb'])
    assert code == 0, out
    assert 'pool pa' not in out
    assert 'pool pb:\n2 queues, 4 messages in the source' in out
    assert len(listed(catalog.lookup('qb', project + '-other'), 'qb',
                      project + '-other')) == 2
    assert len(listed(catalog.lookup('qb', project), 'qb', project)) == 2
    assert listed(catalog.lookup('qa1', project), 'qa1', project) == []


@pytest.mark.parametrize('argv, error', [
    (['--pool-source', 'pa=redis://x'],
     'pool pb: name its old store with --pool-source pb=URI'),
    (['--pool', 'pz', '--pool-source', 'pz=redis://x'],
     'no pool named pz'),
    (['--pool', 'pa', '--pool-source', 'pa=redis://x', '--pool-source',
      'pb=redis://x'], '--pool-source names pb, not a selected pool'),
    (['--pool-source', 'pa'], "--pool-source 'pa': expected NAME=URI"),
    # pb's source is refused: pa, listed first, does not move either.
    (['--pool-source', 'pa=redis://x', '--pool-source', 'pb=http://x'],
     "source URI 'http://x': the scheme must be one of"),
    (['--source-uri', 'redis://x'], 'name each pool\'s old store with '
     '--pool-source NAME=URI instead of --source-uri'),
    # A typo of a queue name: it matched nothing and the run exited 0.
    (['--pool-source', 'pa=redis://x', '--pool-source', 'pb=redis://x',
      '--queue', 'qa1', '--queue', 'qb9'], '--queue names no queue of the '
     'selected projects and pools: qb9; nothing moved'),
])
def test_a_bad_selection_is_refused_and_moves_nothing(pools, project, argv,
                                                      error):
    path, control, catalog, urls = pools
    filled(control, urls, project)
    with pytest.raises(SystemExit) as refused:
        migrate(path, '--project-id', project, *argv)
    assert error in str(refused.value)
    assert listed(catalog.lookup('qa1', project), 'qa1', project) == []


def test_a_bad_swift_source_of_a_later_pool_is_refused_before_any_moves(
        pools, project):
    """A swift:// source was checked for its scheme only until its
    pool's turn came: pa's queues had moved when pb's auth mode was
    refused."""
    path, control, catalog, urls = pools
    filled(control, urls, project)
    with pytest.raises(SystemExit) as refused:
        migrate(path, '--project-id', project,
                '--pool-source', 'pa=' + urls['pa'],
                '--pool-source', 'pb=swift://u:k@/proj?auth=v9')
    assert 'auth must be one of' in str(refused.value)
    assert listed(catalog.lookup('qa1', project), 'qa1', project) == []


def test_upgrade_layout_with_pooling_on_is_refused(pools, project):
    # docs/migration.md: --upgrade-layout works on one store; with
    # pooling on it is run per pool, with a zaqar.conf naming that store.
    path, control, catalog, urls = pools
    with pytest.raises(SystemExit) as refused:
        migrate(path, '--upgrade-layout')
    assert 'pooling is on: --upgrade-layout works on one store' in str(
        refused.value)


def test_a_pool_still_on_zaqars_driver_is_refused(pools, project):
    path, control, catalog, urls = pools
    control.pools_controller.create('pc', 100, urls['pa'])
    with pytest.raises(SystemExit) as refused:
        migrate(path, '--pool', 'pc', '--pool-source', 'pc=' + urls['pa'])
    assert 'pool pc is registered with redis://, not a zaqar-delay store' \
        in str(refused.value)


@pytest.mark.parametrize('target_name', ['redis'])
def test_pool_options_without_pooling_are_refused(migrate, target_name):
    with pytest.raises(SystemExit) as refused:
        migrate('--pool', 'pa')
    assert '--pool and --pool-source need pooling = true' in str(
        refused.value)
