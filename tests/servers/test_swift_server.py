"""Smoke tests for the real single-node Swift fixture (localstack).

Skipped when Swift is not installed locally; *fails* when $CI is set, so a
CI machine that forgot scripts/install-swift.sh cannot go green silently.
"""

import os
import time
import uuid

import pytest

from localstack.swift_server import SwiftServer
from localstack.swift_server import SwiftUnavailable
from localstack.swift_server import ensure_swift_installed


def _in_ci():
    return os.environ.get('CI', '').strip().lower() not in ('', '0', 'false',
                                                            'no')


def _unavailable(reason):
    if _in_ci():
        pytest.fail('CI is set but %s' % reason, pytrace=False)
    pytest.skip(reason)


def _swiftclient():
    try:
        from swiftclient import client
    except ImportError as e:
        _unavailable('python-swiftclient is not importable: %s' % e)
    return client


@pytest.fixture(scope='module')
def swift():
    try:
        ensure_swift_installed(expirer=True)
    except SwiftUnavailable as e:
        _unavailable(str(e))
    server = SwiftServer()
    try:
        server.start()
    except SwiftUnavailable as e:
        _unavailable(str(e))
    try:
        yield server
    finally:
        server.stop()


def test_put_if_none_match_list_delete(swift):
    client = _swiftclient()
    assert swift.startup_seconds < 30
    conn = client.Connection(authurl=swift.auth_url, user=swift.user,
                             key=swift.key, auth_version='1')
    container = 'c-%s' % uuid.uuid4().hex
    conn.put_container(container)

    conn.put_object(container, 'msg-1', b'hello',
                    headers={'If-None-Match': '*'})
    with pytest.raises(client.ClientException) as exc:
        conn.put_object(container, 'msg-1', b'again',
                        headers={'If-None-Match': '*'})
    assert exc.value.http_status == 412
    # the first write won
    assert conn.get_object(container, 'msg-1')[1] == b'hello'

    _, listing = conn.get_container(container)
    assert [o['name'] for o in listing] == ['msg-1']

    conn.delete_object(container, 'msg-1')
    assert conn.get_container(container)[1] == []
    conn.delete_container(container)


def test_second_account_is_isolated(swift):
    client = _swiftclient()
    conn1 = client.Connection(**swift.credentials)
    conn2 = client.Connection(**swift.credentials2)
    container = 'iso-%s' % uuid.uuid4().hex
    conn1.put_container(container)
    conn1.put_object(container, 'o', b'x')
    url1, _ = conn1.get_auth()
    url2, _ = conn2.get_auth()
    assert url1 == swift.storage_url and url2 == swift.storage_url2
    assert container not in [c['name'] for c in conn2.get_account()[1]]
    # test2's token does not grant access to AUTH_test
    with pytest.raises(client.ClientException) as exc:
        client.get_object(url1, conn2.get_auth()[1], container, 'o')
    assert exc.value.http_status in (401, 403)
    conn1.delete_object(container, 'o')
    conn1.delete_container(container)


def test_uses_private_swift_conf(swift):
    # the storage-policy alias only exists in the fixture's own swift.conf,
    # proving /etc/swift/swift.conf was not used
    policies = swift.info()['swift']['policies']
    assert SwiftServer.policy_alias in policies[0]['aliases']


def test_expirer_removes_expired_objects_from_listing(swift):
    client = _swiftclient()
    conn = client.Connection(**swift.credentials)
    container = 'exp-%s' % uuid.uuid4().hex
    conn.put_container(container)
    # A few seconds of slack: on a loaded machine a one-second deadline can
    # pass before the PUT arrives, which Swift refuses as "in past".
    delete_at = int(time.time()) + 3
    conn.put_object(container, 'short', b'x',
                    headers={'X-Delete-At': str(delete_at)})
    conn.put_object(container, 'long', b'y',
                    headers={'X-Delete-After': '3600'})
    time.sleep(max(0, delete_at - time.time()) + 1.1)
    # expired: gone for reads, but still listed until the expirer runs
    with pytest.raises(client.ClientException) as exc:
        conn.head_object(container, 'short')
    assert exc.value.http_status == 404
    assert sorted(o['name'] for o in conn.get_container(container)[1]) == [
        'long', 'short']
    swift.run_expirer_once()
    assert [o['name'] for o in conn.get_container(container)[1]] == ['long']


def test_cpu_seconds_counts_children_that_ended_and_survives_them():
    # The object-updater forks a child per sweep; the benchmark read a
    # pid that ended between listing and reading and crashed. A parent
    # that forks a CPU-burning child, waits for it, then sleeps: its
    # count must include the child's CPU, and a pid gone reads as 0.
    import subprocess
    import sys

    from localstack import swift_server
    script = ('import os, time\n'
              'pid = os.fork()\n'
              'if pid == 0:\n'
              '    end = time.process_time() + 0.3\n'
              '    while time.process_time() < end: pass\n'
              '    os._exit(0)\n'
              'os.waitpid(pid, 0)\n'
              'print("reaped", flush=True)\n'
              'time.sleep(30)\n')
    parent = subprocess.Popen([sys.executable, '-c', script],
                              stdout=subprocess.PIPE)
    try:
        assert parent.stdout.readline() == b'reaped\n'
        assert swift_server._tree_cpu_seconds(parent.pid) >= 0.25
    finally:
        parent.kill()
        parent.wait()
    assert swift_server._tree_cpu_seconds(parent.pid) == 0.0
