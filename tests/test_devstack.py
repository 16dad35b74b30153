"""devstack/plugin.sh, run phase by phase against a scratch zaqar.conf.

devstack's helpers are replaced by stand-ins: ``iniset`` edits the file
(through configparser), the others record their calls. What is checked is
the configuration Zaqar would start with.
"""

import configparser
import pathlib
import subprocess
import sys
from importlib import metadata

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

INISET = """
import configparser, sys
path, section, option, value = sys.argv[1:5]
conf = configparser.ConfigParser(interpolation=None)
conf.optionxform = str
conf.read(path)
if section != 'DEFAULT' and not conf.has_section(section):
    conf.add_section(section)
conf.set(section, option, value)
with open(path, 'w') as out:
    conf.write(out)
"""

STAND_INS = r"""
iniset() { "$ZD_PYTHON" "$ZD_INISET" "$@"; }
record() { echo "$*" >> "$ZD_CALLS"; }
setup_develop() { record setup_develop "$@"; }
install_package() { record install_package "$@"; }
restart_service() { record restart_service "$@"; }
run_process() { record run_process "$@"; }
stop_process() { record stop_process "$@"; }
echo_summary() { :; }
die() { echo "die: ${*:2}" >&2; exit 1; }
is_fedora() { [[ "${ZD_DISTRO:-debian}" == fedora ]]; }
is_service_enabled() {
    local service
    for service in "$@"; do
        [[ ",$ENABLED_SERVICES," == *",$service,"* ]] && return 0
    done
    return 1
}
get_python_exec_prefix() { echo /opt/stack/data/venv/bin; }
DEST=/opt/stack
SERVICE_PASSWORD=secret
KEYSTONE_SERVICE_URI=http://10.0.0.1/identity
source devstack/settings
source devstack/plugin.sh "$@"
"""

# What Zaqar's own devstack plugin leaves in zaqar.conf (MongoDB backend).
ZAQAR_DEVSTACK_CONF = """[DEFAULT]
pooling = True

[drivers]
transport = websocket
message_store = mongodb
management_store = mongodb

[drivers:message_store:mongodb]
uri = mongodb://localhost:27017/zaqar
database = zaqar

[drivers:management_store:mongodb]
uri = mongodb://localhost:27017/zaqar_mgmt
database = zaqar_mgmt
"""


class Devstack:
    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.zaqar_conf = tmp_path / 'zaqar.conf'
        self.zaqar_conf.write_text(ZAQAR_DEVSTACK_CONF)
        self.tempest_conf = tmp_path / 'tempest.conf'
        self.calls_file = tmp_path / 'calls'
        (tmp_path / 'iniset.py').write_text(INISET)

    def run(self, *phase, **settings):
        env = {'PATH': '/usr/bin:/bin', 'ZD_PYTHON': sys.executable,
               'ZD_INISET': str(self.tmp / 'iniset.py'),
               'ZD_CALLS': str(self.calls_file),
               'ZAQAR_CONF': str(self.zaqar_conf),
               'TEMPEST_CONFIG': str(self.tempest_conf)}
        env.update(settings)
        return subprocess.run(['bash', '-c', STAND_INS, 'devstack'] +
                              list(phase), cwd=ROOT, env=env,
                              capture_output=True, text=True)

    def ok(self, *phase, **settings):
        result = self.run(*phase, **settings)
        assert result.returncode == 0, result.stderr
        return result

    @property
    def calls(self):
        if not self.calls_file.exists():
            return []
        return self.calls_file.read_text().splitlines()

    @staticmethod
    def read(path):
        # [DEFAULT] read as a plain section, so it leaks into no other.
        conf = configparser.ConfigParser(interpolation=None,
                                         default_section='no defaults')
        conf.read(path)
        return conf


@pytest.fixture
def devstack(tmp_path):
    return Devstack(tmp_path)


@pytest.mark.parametrize('backend, section', [
    ('redis', {'uri': 'delay.redis://127.0.0.1:6379/0'}),
    ('mongodb', {'uri': 'delay.mongodb://127.0.0.1:27017',
                 'database': 'zaqar_delay'}),
    ('swift', {'uri': 'delay.swift://zaqar:secret@/service',
               'auth_url': 'http://10.0.0.1/identity/v3'}),
])
def test_post_config_points_zaqar_at_our_driver(devstack, backend, section):
    devstack.ok('stack', 'post-config', ZAQAR_DELAY_BACKEND=backend,
                ENABLED_SERVICES='zaqar-wsgi,s-proxy')
    conf = devstack.read(devstack.zaqar_conf)
    store = 'delay.' + backend
    assert conf['drivers']['message_store'] == store
    assert store in {ep.name for ep in
                     metadata.entry_points(group='zaqar.data.storage')}
    assert dict(conf['drivers:message_store:' + store]) == section
    assert conf['transport']['max_message_delay'] == '900'
    assert conf['transport']['subscriber_types'] == \
        'http,https,mailto,trust+http,trust+https,cursor'
    # Zaqar's management store and the rest of its file are left alone.
    assert conf['drivers']['management_store'] == 'mongodb'
    assert conf['drivers:management_store:mongodb']['database'] == \
        'zaqar_mgmt'
    assert conf['DEFAULT']['pooling'] == 'True'


def test_local_conf_settings_win(devstack):
    devstack.ok('stack', 'post-config', ZAQAR_DELAY_BACKEND='redis',
                ZAQAR_DELAY_REDIS_URI='delay.redis://10.0.0.5:6380/2',
                ZAQAR_DELAY_MAX_MESSAGE_DELAY='600',
                ZAQAR_DELAY_SUBSCRIBER_TYPES='http,https')
    conf = devstack.read(devstack.zaqar_conf)
    assert conf['drivers:message_store:delay.redis']['uri'] == \
        'delay.redis://10.0.0.5:6380/2'
    assert conf['transport']['max_message_delay'] == '600'
    assert conf['transport']['subscriber_types'] == 'http,https'


@pytest.mark.parametrize('settings, reason', [
    ({'ZAQAR_DELAY_BACKEND': 'sqlalchemy'},
     "must be redis, mongodb or swift, not 'sqlalchemy'"),
    ({'ZAQAR_DELAY_BACKEND': 'swift', 'ENABLED_SERVICES': 'zaqar-wsgi'},
     'needs Swift'),
])
def test_bad_backend_stops_and_changes_nothing(devstack, settings, reason):
    result = devstack.run('stack', 'post-config', **settings)
    assert result.returncode != 0
    assert reason in result.stderr
    assert devstack.zaqar_conf.read_text() == ZAQAR_DEVSTACK_CONF


@pytest.mark.parametrize('backend, distro, packages', [
    ('redis', 'debian', ['install_package redis-server',
                         'restart_service redis-server']),
    ('redis', 'fedora', ['install_package redis', 'restart_service redis']),
    ('mongodb', 'debian', []),
])
def test_install_puts_us_into_zaqars_environment(devstack, backend, distro,
                                                 packages):
    devstack.ok('stack', 'install', ZAQAR_DELAY_BACKEND=backend,
                ZD_DISTRO=distro)
    assert devstack.calls == ['setup_develop /opt/stack/zaqar-delay'] + \
        packages


def test_extra_restarts_zaqar_and_starts_gc(devstack):
    devstack.ok('stack', 'extra',
                ENABLED_SERVICES='zaqar-wsgi,zaqar-websocket,zaqar-delay-gc')
    assert devstack.calls == [
        'restart_service devstack@zaqar-wsgi',
        'restart_service devstack@zaqar-websocket',
        'run_process zaqar-delay-gc /opt/stack/data/venv/bin/zaqar-delay-gc '
        '--config-file {} --full_scan_time 60'.format(devstack.zaqar_conf)]


@pytest.mark.parametrize('settings', [
    {'ZAQAR_DELAY_GC_FULL_SCAN_TIME': '30'},
    # The old name of the setting, from before --interval was deprecated.
    {'ZAQAR_DELAY_GC_INTERVAL': '30'},
])
def test_gc_is_paced_by_full_scan_time(devstack, settings):
    devstack.ok('stack', 'extra', ENABLED_SERVICES='zaqar-delay-gc',
                **settings)
    assert devstack.calls == [
        'run_process zaqar-delay-gc /opt/stack/data/venv/bin/zaqar-delay-gc '
        '--config-file {} --full_scan_time 30'.format(devstack.zaqar_conf)]


def test_unstack_stops_gc(devstack):
    devstack.ok('unstack')
    assert devstack.calls == ['stop_process zaqar-delay-gc']


def test_test_config_sets_our_tempest_options(devstack):
    devstack.ok('stack', 'test-config', ZAQAR_DELAY_MAX_MESSAGE_DELAY='600')
    conf = devstack.read(devstack.tempest_conf)
    assert conf['service_available']['zaqar'] == 'True'
    assert conf['zaqar_delay']['max_message_delay'] == '600'
    # The other phases do not touch tempest.conf, nor this one zaqar.conf.
    assert devstack.zaqar_conf.read_text() == ZAQAR_DEVSTACK_CONF
