"""The python-zaqarclient examples of the user guide
(doc/source/examples, shown with literalinclude) and the curl examples
of docs/usage.md run against a live zaqar-server on our Redis driver,
configured as doc/source/install.rst says, and do what the guides say."""

import os
import pathlib
import re
import runpy
import shutil
import subprocess
import uuid

import pytest
import requests

from localstack import zaqar_server

pytestmark = [pytest.mark.integration]
ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / 'doc' / 'source' / 'examples'
SH_BLOCK = re.compile(r'^```sh\n(.*?)^```', re.S | re.M)


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


def curl_commands(page):
    """The shell blocks of ``page`` that call curl."""
    return [block for block in SH_BLOCK.findall(page.read_text())
            if 'curl ' in block]


def test_every_curl_example_that_sends_a_body_says_it_is_json():
    # Zaqar refuses a body curl sends as a form (its default) with 400.
    pages = [ROOT / 'README.md'] + sorted((ROOT / 'docs').glob('*.md'))
    commands = [command for page in pages for block in curl_commands(page)
                for command in re.split(r'\n(?=curl )', block)
                if ' -d ' in command]
    assert len(commands) >= 8
    assert [c for c in commands if 'Content-Type: application/' not in c] \
        == []


def test_the_usage_guides_curl_examples_work_as_written(zaqar_url, project):
    # As written, in order, with curl failing on an HTTP error.
    assert shutil.which('curl'), 'scripts/setup.sh test installs curl'
    script = 'set -e\ncurl() { command curl -sS --fail-with-body "$@"; }\n'
    script += '\n'.join(curl_commands(ROOT / 'docs' / 'usage.md'))
    client = str(uuid.uuid4())
    result = subprocess.run(
        ['bash', '-c', script], capture_output=True, text=True, timeout=60,
        env=dict(os.environ, ZAQAR=zaqar_url, P=project, C=client))
    assert result.returncode == 0, result.stdout + result.stderr
    headers = {'X-Project-ID': project, 'Client-ID': client}

    def get(path):
        response = requests.get(zaqar_url + path, headers=headers)
        assert response.status_code == 200, response.text
        return response.json()

    assert get('/v2/queues/orders')['_default_message_delay'] == 60
    counts = get('/v2/queues/orders/stats')['messages']
    assert (counts['total'], counts['delayed']) == (3, 2)
    carts = get('/v2/queues/carts')
    assert (carts['_message_group_key'], carts['_message_group_sticky']) \
        == ('cart', 300)
    assert get('/v2/queues/carts/stats')['messages']['total'] == 2
