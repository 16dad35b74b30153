"""Fixtures: real servers started on loopback, one driver per backend.

A server that cannot be started skips its tests locally but fails the run in
CI (``CI`` set), so a broken install never passes as green.
"""

import importlib
import os
import uuid

import pytest

from localstack import backends
from tests import crew as crew_module
from localstack import factories
from localstack import redis_server

IN_CI = bool(os.environ.get('CI'))


def unavailable(reason):
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items):
    """Under ``--dist loadgroup`` (scripts/test.sh) the tests of a module
    that has a module-scoped fixture (its own zaqar-server, Keystone or
    Swift) all go to one xdist worker, which starts those servers once;
    every other test goes to whichever worker is free.

    The Keystone group (minutes on one worker) and the tests marked
    ``slow`` run first: xdist hands out work in collection order, and
    collected where they fall (tests/tempest, tests/worker near the end)
    one worker ran them alone while the other had nothing left. Within
    the Keystone group, ``keystone(order=N)`` moves a test before (N < 0)
    or after (N > 0) the others: tests/tempest starts upstream's long
    tempest run first and checks it last, so the group's other tests
    run during its sleeps."""
    def rank(item):
        keystone = item.get_closest_marker('keystone')
        if keystone:
            return 0, keystone.kwargs.get('order', 0)
        return (1 if item.get_closest_marker('slow') else 2), 0

    items.sort(key=rank)
    for item in items:
        info = getattr(item, '_fixtureinfo', None)
        if item.get_closest_marker('keystone'):
            # One Keystone (slow to start) serves every module that needs
            # one, on one worker.
            item.add_marker(pytest.mark.xdist_group('keystone'))
        elif info and any(defs[-1].scope == 'module'
                          for defs in info.name2fixturedefs.values()):
            item.add_marker(pytest.mark.xdist_group(
                item.nodeid.split('::')[0]))


UNGROUPED = pytest.StashKey[str]()


def pytest_collection_finish(session):
    """Every test fails, saying why, when pytest-xdist could not put the
    groups in the test ids it schedules by: pytest 9.2 with xdist 3.8 did
    that quietly, so each module's servers started on both workers and
    the Keystone group's background run was checked where it never
    started."""
    config = session.config
    if not (hasattr(config, 'workerinput')
            and config.getoption('loadgroup', False)):
        return
    ungrouped = [item.nodeid for item in session.items
                 if item.get_closest_marker('xdist_group')
                 and '@' not in item.nodeid]
    if ungrouped:
        config.stash[UNGROUPED] = (
            '--dist loadgroup did not group {} tests (first: {}); see '
            'the pin in test-requirements.txt'.format(len(ungrouped),
                                                      ungrouped[0]))


def pytest_runtest_setup(item):
    problem = item.config.stash.get(UNGROUPED, None)
    if problem:
        pytest.fail(problem)


@pytest.fixture(scope='session')
def redis_url():
    for server in redis_session():
        yield server.url


def served(server, *failures):
    """Start ``server`` for a fixture, yield it and stop it; skip (fail in
    CI) when its start raises one of ``failures``."""
    try:
        server.start()
    except failures as exc:
        unavailable(str(exc))
    yield server
    server.stop()


def redis_session():
    """Start a Redis server of its own for a fixture (a test or module
    whose store must hold its data alone); skip (fail in CI) if it
    cannot."""
    yield from served(redis_server.RedisServer(),
                      redis_server.RedisUnavailable)


@pytest.fixture
def own_redis():
    """A Redis server of this test alone."""
    yield from redis_session()


@pytest.fixture(scope='session')
def redis_cluster():
    """A real 3-master Redis Cluster on loopback, once per session."""
    from localstack import redis_cluster as cluster_module
    try:
        cluster = cluster_module.RedisCluster().start()
    except redis_server.RedisUnavailable as exc:
        unavailable(str(exc))
    yield cluster
    cluster.stop()


@pytest.fixture(scope='session')
def redis_cluster_url(redis_cluster):
    """``delay.redis://h1:p1,h2:p2,h3:p3?cluster=true`` for that cluster."""
    return redis_cluster.url


@pytest.fixture(params=factories.BACKENDS)
def backend_name(request):
    return request.param


@pytest.fixture
def operator_config():
    """Text of a configuration file the drivers read (as an operator's
    zaqar.conf), ``{project}`` standing for the test's project. A test
    parametrizes this to set [retention] and its override sections before
    the driver and its controllers are built."""
    return ''


@pytest.fixture
def conf(operator_config, tmp_path, project):
    if not operator_config:
        return backends.make_conf()
    path = tmp_path / 'operator.conf'
    path.write_text(operator_config.format(project=project))
    return backends.make_conf(config_files=[path])


@pytest.fixture
def driver(backend_name, request, conf):
    factory = importlib.import_module('localstack.factories.' + backend_name)
    data_driver = factory.make_driver(request, conf)
    yield data_driver
    data_driver.close()


@pytest.fixture
def clock(driver):
    fake = backends.FakeClock()
    driver.use_clock(fake)
    yield fake
    driver.use_clock(None)


@pytest.fixture
def project():
    """A fresh project per test, so tests never see each other's queues."""
    return 'project-' + uuid.uuid4().hex[:8]


@pytest.fixture
def make_queue(driver, project):
    def make(metadata=None, name=None):
        name = name or 'q-' + uuid.uuid4().hex[:8]
        driver.queue_controller.create(name, metadata=metadata or {},
                                       project=project)
        return name
    return make


@pytest.fixture(scope='session')
def swift_server():
    """A real single-node Swift (tempauth) on loopback, once per session
    (per xdist worker)."""
    yield from swift_session()


def swift_session(**options):
    """Start a Swift (``SwiftServer`` with ``options``) for a session or
    module fixture; skip (fail in CI) if it cannot."""
    from localstack import swift_server as swift_module
    yield from served(swift_module.SwiftServer(**options),
                      swift_module.SwiftUnavailable,
                      swift_module.SwiftStartError)


@pytest.fixture(scope='session')
def keystone():
    """A real Keystone on loopback, once per session: the modules that use
    it are marked ``keystone``, which puts them on one xdist worker
    (pytest_collection_modifyitems)."""
    from localstack import keystone_server
    yield from served(keystone_server.KeystoneServer(),
                      keystone_server.KeystoneUnavailable)


@pytest.fixture(scope='session')
def keystone_swift(keystone):
    """A Swift that takes ``keystone``'s tokens too, registered there as
    the object-store service."""
    for server in swift_session(keystone=keystone.service_options()):
        keystone.register_service('object-store', 'swift',
                                  server.keystone_endpoint)
        yield server


@pytest.fixture(autouse=True)
def own_swift_account():
    """Each test on the next spare account of the test Swift
    (localstack/factories/swift.py says why)."""
    from localstack.factories import swift as swift_factory
    swift_factory.next_account()


@pytest.fixture
def crew(tmp_path):
    """Spawned worker processes for a multi-process test: a crashed worker
    fails the test at once with its stderr (tests/crew.py)."""
    workers = crew_module.Crew(tmp_path)
    yield workers
    workers.stop()
