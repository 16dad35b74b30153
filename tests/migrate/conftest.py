"""Fixtures for zaqar-delay-migrate: a Redis server of the module alone
(the command lists every project of its management store), a zaqar.conf
naming one of our drivers as message_store (``target_name``: Redis on
that server, MongoDB on mongomock, Swift on the session's Swift), Zaqar's
own Redis driver as the source on the same Redis server, and ours reading
the result back."""

import datetime
import importlib
import io
import os
import signal
import subprocess
import sys
import types
import uuid

import pytest
from oslo_utils import timeutils

from localstack import backends
from tests import conftest as shared
from localstack import factories
from tests.contract.helpers import listed
from localstack.factories import mongodb as mongodb_factory
from localstack import zaqar_server
from zaqar_delay.migrate import cli


@pytest.fixture(scope='module')
def own_redis():
    yield from shared.redis_session()


@pytest.fixture
def project():
    return 'p-' + uuid.uuid4().hex[:8]


@pytest.fixture(params=factories.BACKENDS)
def target_name(request):
    """The backend of our driver that the command moves into."""
    return request.param


@pytest.fixture
def target_store(target_name, own_redis, request):
    """(message_store, its options) of the target in zaqar.conf."""
    if target_name == 'redis':
        return 'delay.redis', {
            'uri': own_redis.url.replace('redis://', 'delay.redis://')}
    factory = importlib.import_module('localstack.factories.' + target_name)
    return factory.zaqar_store(request)


@pytest.fixture
def config(own_redis, target_store, tmp_path):
    return zaqar_server.write_config(str(tmp_path), own_redis.url, 0,
                                     *target_store)


@pytest.fixture
def control(own_redis):
    return backends.control_driver(backends.make_conf(), own_redis.url)


@pytest.fixture
def zaqar_redis(own_redis, control):
    """Zaqar's own Redis data driver: the old store."""
    from zaqar.storage.redis import driver
    conf = backends.make_conf(**{'drivers:message_store:redis': {
        'uri': own_redis.url}})
    return driver.DataDriver(conf, None, control)


@pytest.fixture
def ours(own_redis, config, target_store, request):
    """Our target driver as the command's zaqar.conf configures it."""
    driver = importlib.import_module('zaqar_delay.drivers.{}.driver'.format(
        target_store[0].split('.', 1)[1]))
    conf = backends.make_conf(config_files=[config])
    data = driver.DataDriver(conf, None, backends.control_driver(
        conf, own_redis.url))
    request.addfinalizer(data.close)
    return data


@pytest.fixture
def migrate(config, own_redis, monkeypatch):
    """Run the command in this process: (exit status, its output)."""
    # Keep pytest's log capture: oslo.log would replace its handler.
    monkeypatch.setattr(cli.logging, 'setup', lambda *a: None)

    def run(*argv):
        out = io.StringIO()
        code = cli.main(['--config-file', config, '--source-uri',
                         own_redis.url, *argv], out=out)
        return code, out.getvalue()
    return run


CLIENT = uuid.UUID('11111111-1111-4111-8111-111111111111')


def posted_ago(seconds, post):
    """Run ``post()`` as if ``seconds`` ago. Zaqar's Redis and MongoDB
    drivers stamp created with oslo's clock, its Swift driver in the
    uuid1 that names the message (Swift's own timestamp is the real one;
    so is its expiry, which the Swift source reads)."""
    from zaqar.storage.swift import messages as swift_messages
    timeutils.set_time_override(timeutils.utcnow() - datetime.timedelta(
        seconds=seconds))
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(swift_messages, 'uuid', types.SimpleNamespace(
        uuid1=lambda: uuid1_ago(seconds)))
    try:
        return post()
    finally:
        timeutils.clear_time_override()
        monkeypatch.undo()


def uuid1_ago(seconds):
    """A fresh uuid1 whose clock reads ``seconds`` ago."""
    now = uuid.uuid1()
    ticks = now.time - int(seconds * 10_000_000)
    return uuid.UUID(fields=(
        ticks & 0xffffffff, (ticks >> 32) & 0xffff,
        (ticks >> 48) & 0x0fff | 0x1000, now.clock_seq_hi_variant,
        now.clock_seq_low, now.node))


def zaqar_post(zaqar_driver, queue, project, bodies, ttl=300, delay=0,
               ago=0):
    """Post ``bodies`` with one of Zaqar's own drivers: their ids."""
    return posted_ago(ago, lambda: zaqar_driver.message_controller.post(
        queue, [{'ttl': ttl, 'delay': delay, 'body': body}
                for body in bodies], CLIENT, project=project))


def zaqar_listed(zaqar_driver, queue, project, ids):
    """Those of ``ids`` the old store holds (Zaqar's Redis list() cannot
    start a listing that includes claimed messages: it looks up marker
    None)."""
    return list(zaqar_driver.message_controller.bulk_get(queue, ids,
                                                         project=project))


FOUR_MOVED = ('4 messages (0 expired, skipped), 0 subscriptions, 4 verified, '
              '0 differences, 0 deleted')


def moved_queue(migrate, ours, project, summary):
    """Run the command on ``project`` and check it printed ``summary``:
    every message of its queue ``q`` in the target, delayed and claimed
    ones included."""
    code, out = migrate('--project-id', project)
    assert code == 0, out
    assert summary in out
    return listed(ours, 'q', project, include_claimed=True,
                  include_delayed=True)


def skip_mongomock_in_a_subprocess(target_name):
    if target_name == 'mongodb' and not mongodb_factory.real_server_uri():
        pytest.skip('mongomock lives in this process, the command in its '
                    'own: set ' + mongodb_factory.URI_ENV)


def killed_and_run_again(ours, command, project, ids, batch, moved_batches):
    """Kill ``command`` after ``moved_batches`` batches of ``batch``, check
    the target holds some of ``ids`` (queue ``q``) but not all, run it to
    the end; the target's messages, each of ``ids`` once, in order."""
    kill_after(command, moved_batches)
    partial = listed(ours, 'q', project)
    assert batch * moved_batches <= len(partial) < len(ids)
    run_to_the_end(command)
    after = listed(ours, 'q', project)
    assert [m['id'] for m in after] == ids
    return after


def migrate_command(config, source_uri, project, batch):
    return [sys.executable, '-m', 'zaqar_delay.migrate', '--config-file',
            config, '--source-uri', source_uri, '--project-id', project,
            '--batch', str(batch)]


def kill_after(command, moved_batches):
    """Run ``command`` in its own process and SIGKILL it once it printed
    ``moved_batches`` "moved:" progress lines."""
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    first = subprocess.Popen(command, stdout=subprocess.PIPE, text=True,
                             env=env)
    moved_lines = 0
    for line in first.stdout:
        moved_lines += line.startswith('moved:')
        if moved_lines == moved_batches:
            first.send_signal(signal.SIGKILL)
            break
    first.wait(timeout=60)
    first.stdout.close()
    assert first.returncode == -signal.SIGKILL


def run_to_the_end(command):
    """Run ``command`` in its own process; its output, once it exited 0."""
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stdout
    return done.stdout
