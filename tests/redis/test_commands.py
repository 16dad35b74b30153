"""The operator commands, run as an operator would, against a zaqar.conf."""

import json
import os
import subprocess
import sys
import time

import pytest
import redis as redis_py

from tests.contract.helpers import CLIENT
from localstack.factories import redis as redis_factory
from localstack import scratch
from localstack import zaqar_server
from zaqar_delay import sticky

pytestmark = pytest.mark.integration


@pytest.fixture
def config(request, redis_url):
    store, options = redis_factory.zaqar_store(request)
    return zaqar_server.write_config(scratch.scratch_dir('zd-conf-'),
                                     redis_url, 0, store, options)


def command(name, config, *args):
    binary = os.path.join(os.path.dirname(sys.executable), name)
    return subprocess.run([binary, '--config-file', config, *args],
                          timeout=60, capture_output=True, text=True)


def test_gc_once_removes_expired_messages(redis_url, request, conf, config):
    driver = redis_factory.make_driver(request, conf)
    driver.queue_controller.create('expiring', project='gc-test')
    driver.message_controller.post(
        'expiring', [{'ttl': 1, 'body': n} for n in range(20)], CLIENT,
        project='gc-test')
    raw = redis_py.Redis.from_url(redis_url)
    pattern = 'zd:{gc-test/expiring}:*'
    assert len(list(raw.scan_iter(pattern))) > 20
    time.sleep(1.1)
    assert command('zaqar-delay-gc', config, '--once').returncode == 0
    # The queue stays, and with it its metadata copy (metadata.py).
    left = sorted(k.decode() for k in raw.scan_iter(pattern)
                  if not k.decode().endswith((':meta', ':metagen')))
    assert left == ['zd:{gc-test/expiring}:seq']


def test_groups_command_lists_purges_and_moves(request, conf, config,
                                               project):
    driver = redis_factory.make_driver(request, conf)
    for name in ('src', 'dst'):
        driver.queue_controller.create(
            name, metadata={'_message_group_key': 'g'}, project=project)
    driver.message_controller.post('src', [
        {'ttl': 600, 'body': {'g': g, 'n': n}}
        for g in ('a', 'b') for n in range(3)] + [
        {'ttl': 600, 'body': {'g': 7, 'n': 0}}], CLIENT, project=project)

    listed = command('zaqar-delay-groups', config, 'list', project, 'src')
    assert listed.returncode == 0, listed.stderr
    groups = [json.loads(line) for line in listed.stdout.splitlines()]
    # Listed in the order of their stored (JSON) form: strings first.
    assert [(g['id'], g['depth']) for g in groups] == [
        ('a', 3), ('b', 3), (7, 1)]

    moved = command('zaqar-delay-groups', config, 'move', project, 'src',
                    'a', 'dst')
    assert moved.returncode == 0 and 'moved 3' in moved.stdout
    purged = command('zaqar-delay-groups', config, 'purge', project, 'src',
                     'int:7')
    assert purged.returncode == 0 and 'purged 1' in purged.stdout
    pages = driver.message_controller.list('dst', project=project,
                                           echo=True)
    assert [m['body']['n'] for m in next(pages)] == [0, 1, 2]
    assert driver.message_controller.stats(
        'src', project)['messages']['total'] == 3

    missing = command('zaqar-delay-groups', config, 'move', project, 'src',
                      'b', 'nowhere')
    assert missing.returncode == 1 and 'nowhere' in missing.stderr
    # A traceback before.
    not_int = command('zaqar-delay-groups', config, 'purge', project, 'src',
                      'int:abc')
    assert not_int.returncode == 1
    assert "\nerror: group 'int:abc'" in '\n' + not_int.stderr
    # A move its API node left midway (its first step only, of a group
    # larger than a step) refuses a second move, naming it.
    driver.message_controller.post('src', [
        {'ttl': 600, 'body': {'g': 'c', 'n': n}} for n in range(30)],
        CLIENT, project=project)
    done = driver.run_script('group_move', 'src', project, json.dumps('c'),
                             'dst', 'start')[2]
    assert done == 0
    again = command('zaqar-delay-groups', config, 'move', project, 'src',
                    'c', 'dst')
    assert again.returncode == 1, again.stderr
    assert 'error: Group "c" of queue src is being moved' in again.stderr


def test_groups_list_prints_every_group_past_one_page(request, conf, config,
                                                      project):
    """The command reads groups 100 at a time: 250 groups, every one."""
    driver = redis_factory.make_driver(request, conf)
    driver.queue_controller.create('many', metadata={
        '_message_group_key': 'g'}, project=project)
    for start in range(0, 250, 50):
        driver.message_controller.post('many', [
            {'ttl': 600, 'body': {'g': 'g%03d' % n}}
            for n in range(start, start + 50)], CLIENT, project=project)
    listed = command('zaqar-delay-groups', config, 'list', project, 'many')
    assert listed.returncode == 0, listed.stderr
    ids = [json.loads(line)['id'] for line in listed.stdout.splitlines()]
    assert ids == ['g%03d' % n for n in range(250)]


def test_groups_command_shows_and_unpins_sticky_groups(request, conf, config,
                                                       project):
    driver = redis_factory.make_driver(request, conf)
    driver.queue_controller.create('jobs', metadata={
        '_message_group_key': 'g', '_message_group_sticky': 600},
        project=project)
    driver.message_controller.post('jobs', [
        {'ttl': 600, 'body': {'g': g}} for g in ('a', 'a', 'b')], CLIENT,
        project=project)
    with sticky.acting_as('worker-1'):
        claim_id, got = driver.claim_controller.create(
            'jobs', {'ttl': 60}, project=project, limit=1)
        driver.message_controller.delete('jobs', list(got)[0]['id'],
                                         project=project, claim=claim_id)

    def groups(*args):
        # The module zaqar-delay-groups runs (its unpin action is new).
        return subprocess.run(
            [sys.executable, '-m', 'zaqar_delay.cmd.groups',
             '--config-file', config, *args],
            timeout=60, capture_output=True, text=True)

    listed = groups('list', project, 'jobs')
    assert listed.returncode == 0, listed.stderr
    assert [(g['id'], g['client']) for g in map(
        json.loads, listed.stdout.splitlines())] == [('a', 'worker-1'),
                                                     ('b', None)]
    unpinned = groups('unpin', project, 'jobs', 'a')
    assert (unpinned.returncode, unpinned.stdout) == (
        0, 'unpinned from worker-1\n')
    assert groups('unpin', project, 'jobs', 'a').stdout == 'not pinned\n'
    with sticky.acting_as('worker-2'):
        _, got = driver.claim_controller.create('jobs', {'ttl': 60},
                                                project=project)
        assert [m['body']['g'] for m in got] == ['a', 'b']
