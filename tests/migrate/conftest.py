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
import uuid

import pytest
from oslo_utils import timeutils

from tests import backends
from tests import conftest as shared
from tests import factories
from tests.servers import zaqar_server
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
    factory = importlib.import_module('tests.factories.' + target_name)
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


def posted_ago(seconds, post):
    """Run ``post()`` as if ``seconds`` ago (Zaqar stamps created with
    oslo's clock)."""
    timeutils.set_time_override(timeutils.utcnow() - datetime.timedelta(
        seconds=seconds))
    try:
        return post()
    finally:
        timeutils.clear_time_override()


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
