"""The python-zaqarclient examples of the user guide
(doc/source/examples, shown with literalinclude) run against a live
zaqar-server on our Redis driver, configured as doc/source/install.rst
says, and do what the guide says."""

import pathlib
import runpy

import pytest

from localstack import zaqar_server

pytestmark = [pytest.mark.integration]
EXAMPLES = (pathlib.Path(__file__).resolve().parents[1] / 'doc' / 'source'
            / 'examples')


@pytest.fixture(scope='module')
def zaqar_url(redis_url):
    server = zaqar_server.ZaqarServer(
        redis_url, 'delay.redis',
        {'uri': redis_url.replace('redis://', 'delay.redis://')},
        transport_options={'subscriber_types': 'http,https,mailto,'
                           'trust+http,trust+https,cursor'}).start()
    yield server.url
    server.stop()


def run(name, zaqar_url, project):
    return runpy.run_path(str(EXAMPLES / name))['main'](zaqar_url, project)


def test_the_example_files_are_the_ones_tested():
    assert sorted(p.name for p in EXAMPLES.glob('*.py')) == [
        'delayed_queue.py', 'message_groups.py', 'persistent_consumer.py',
        'retention.py', 'worker_app.py']


def test_delayed_queue(zaqar_url, project):
    claimed, counts = run('delayed_queue.py', zaqar_url, project)
    assert claimed == [{'order': 2}]
    assert (counts['claimed'], counts['delayed'], counts['free']) == (1, 2, 0)


def test_message_groups(zaqar_url, project):
    first, second = run('message_groups.py', zaqar_url, project)
    assert sorted(first, key=str) == [{'cart': 'c1', 'op': 'add'},
                                      {'cart': 'c2', 'op': 'add'}]
    assert second == [{'cart': 'c1', 'op': 'remove'}]


def test_retention(zaqar_url, project):
    kept, retention = run('retention.py', zaqar_url, project)
    assert kept == [2, 3, 4]
    assert retention['length'] == 3


def test_persistent_consumer(zaqar_url, project):
    read, rest = run('persistent_consumer.py', zaqar_url, project)
    assert (read, rest) == ([0, 1, 2, 3], [3, 4])


def test_worker_app(zaqar_url, project):
    assert run('worker_app.py', zaqar_url, project) == [7]
