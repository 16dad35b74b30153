"""Our tempest plugin against a live cloud on loopback.

Keystone on sqlite, a real redis-server, ``zaqar-server`` with
``auth_strategy = keystone`` on ``delay.redis``, and ``tempest run
--regex zaqar_delay`` with a generated tempest.conf, every process stopped
by its PID. The same tests run against a devstack cloud (README). Zaqar's
own upstream v2 tempest tests run on the same stack, in the background
from the Keystone group's first test to its last.
"""

import pytest

from localstack import keystone_server
from localstack import tempest_runner
from localstack import zaqar_server
from tests import conftest

pytestmark = [pytest.mark.integration, pytest.mark.tempest,
              pytest.mark.keystone]

AUTHTOKEN = """
[keystone_authtoken]
{authtoken}

# Zaqar creates a Keystone trust for trust+http subscribers (upstream
# tempest's test_trust_subscription) as this user.
[trustee]
auth_type = password
auth_url = {url}
username = admin
password = {password}
user_domain_id = default

# Zaqar's notifier, as clouds that use subscriptions run it: it delivers
# to webhooks and trust+http subscribers on each post.
[storage]
message_pipeline = zaqar.notification.notifier

[transport]
subscriber_types = http,https,mailto,trust+http,trust+https,cursor
"""


@pytest.fixture(scope='module')
def tempest():
    try:
        return tempest_runner.Tempest()
    except tempest_runner.TempestUnavailable as exc:
        conftest.unavailable(str(exc))


@pytest.fixture(scope='session')
def zaqar(redis_url, keystone):
    """Session-scoped: upstream's run (below) outlives this module's
    place in the Keystone group."""
    server = zaqar_server.ZaqarServer(
        redis_url, 'delay.redis',
        {'uri': redis_url.replace('redis://', 'delay.redis://')},
        auth_strategy='keystone',
        extra=AUTHTOKEN.format(
            authtoken='\n'.join('{} = {}'.format(*option) for option in
                                 keystone.service_options().items()),
            url=keystone.url, password=keystone_server.ADMIN_PASSWORD))
    keystone.register_service('messaging', 'zaqar', server.url)
    server.start()
    yield server
    server.stop()


def listed_tests(tempest, regex='zaqar_delay',
                 package='zaqar_delay_tempest_plugin.'):
    result = tempest.run('--list-tests', '--regex', regex)
    assert result.returncode == 0, result.stdout + result.stderr
    return [line for line in result.stdout.splitlines()
            if line.startswith(package)]


def test_tempest_lists_our_tests(tempest):
    # Listing loads the tests without calling the cloud: any address does.
    tempest.write_config('http://127.0.0.1:9/v3', 'unused', 'RegionOne')
    tests = listed_tests(tempest)
    for module in ('test_delayed_queues', 'test_message_groups',
                   'test_redelivery', 'test_negative'):
        assert any('.api.%s.' % module in test for test in tests), module
    # Every test carries tempest's idempotent id.
    assert all('[id-' in test for test in tests), tests


def test_tempest_plugin_passes_against_keystone_zaqar_redis(
        tempest, keystone, zaqar):
    tempest.write_config(keystone.url, keystone_server.ADMIN_PASSWORD,
                         keystone_server.REGION)
    expected = len(listed_tests(tempest))
    result = tempest.run('--regex', 'zaqar_delay', '--concurrency', '2')
    output = result.stdout + result.stderr
    counts = tempest_runner.summary(output)
    assert result.returncode == 0, output[-20000:]
    assert counts == {'Passed': expected, 'Failed': 0, 'Skipped': 0}, \
        output[-20000:]


UPSTREAM = 'zaqar_tempest_plugin.tests.v2'


@pytest.fixture(scope='session')
def upstream_run(keystone, zaqar):
    """Upstream zaqar-tempest-plugin's v2 API tests, run in a workspace of
    their own in the background: two minutes of the run are sleeps (its
    dead-letter test waits out claims twice), which the Keystone group's
    other tests fill. (the tests it lists, the run)."""
    try:
        tempest = tempest_runner.Tempest()
    except tempest_runner.TempestUnavailable as exc:
        conftest.unavailable(str(exc))
    tempest.write_config(keystone.url, keystone_server.ADMIN_PASSWORD,
                         keystone_server.REGION)
    tests = listed_tests(tempest, UPSTREAM, UPSTREAM + '.')
    run = tempest.start('--regex', UPSTREAM, '--concurrency', '2')
    yield tests, run
    run.stop()


@pytest.mark.keystone(order=-1)
def test_zaqars_own_tempest_v2_tests_are_listed_and_started(upstream_run):
    """First in the Keystone group; their outcome is checked last."""
    tests, _ = upstream_run
    # docs/compatibility.md's count, of the pinned zaqar-tempest-plugin
    # (tempest-requirements.txt).
    assert len(tests) == 135
    for module in ('test_queues', 'test_messages', 'test_claims',
                   'test_subscriptions'):
        assert any('.v2.%s.' % module in test for test in tests), module


@pytest.mark.keystone(order=1)
def test_zaqars_own_tempest_v2_tests_pass_against_keystone_zaqar_redis(
        upstream_run):
    """Upstream zaqar-tempest-plugin's v2 API tests (queues, messages,
    claims, subscriptions, purge among them), as an operator would try a
    new message store: every one passes on delay.redis."""
    tests, run = upstream_run
    result = run.finish()
    output = result.stdout + result.stderr
    counts = tempest_runner.summary(output)
    assert result.returncode == 0, output[-20000:]
    assert counts == {'Passed': len(tests), 'Failed': 0, 'Skipped': 0}, \
        output[-20000:]
