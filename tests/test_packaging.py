"""What an operator relies on: entry points, options, docs in sync."""

import configparser
import importlib
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

import yaml
from importlib import metadata

from localstack.factories import BACKENDS
from zaqar_delay import conf as zd_conf

ROOT = pathlib.Path(__file__).resolve().parent.parent
RENO_SECTIONS = {'prelude', 'features', 'issues', 'upgrade', 'deprecations',
                 'critical', 'security', 'fixes', 'other'}


def entry_points(group):
    return {ep.name: ep for ep in metadata.entry_points(group=group)}


def test_every_backend_is_a_zaqar_data_driver_with_its_stages():
    drivers = entry_points('zaqar.data.storage')
    for backend in BACKENDS:
        ep = drivers['delay.' + backend]
        module = ep.value.split(':')[0]
        assert ep.load().__module__ == module
        for resource, stage in (('queue', 'QueueStage'),
                                ('topic', 'TopicStage')):
            stages = entry_points('%s.%s.stages' % (module, resource))
            assert stages['message_queue_handler'].load().__name__ == stage
        # The REST API's subscription listing, consumers included.
        stages = entry_points('%s.subscription.stages' % module)
        assert stages['subscription_listing'].load().__name__ == (
            'SubscriptionStage')


def test_option_generator_lists_every_option_with_help():
    assert entry_points('oslo.config.opts')['zaqar_delay'].load() is \
        zd_conf.list_opts
    out = subprocess.run(
        [sys.executable, '-m', 'oslo_config.generator',
         '--namespace', 'zaqar_delay'], capture_output=True, text=True,
        check=True).stdout
    for group, options in zd_conf.list_opts():
        assert '[%s]' % group in out
        for option in options:
            assert option.help and option.help.rstrip().endswith('.')
            assert '#%s = ' % option.dest in out


def test_release_notes_are_valid_reno_yaml():
    notes = list((ROOT / 'releasenotes' / 'notes').glob('*.yaml'))
    assert notes
    for note in notes:
        assert re.search(r'-[0-9a-f]{16}\.yaml$', note.name), note.name
        content = yaml.safe_load(note.read_text())
        assert set(content) <= RENO_SECTIONS, note.name


def test_api_ref_parameters_are_all_defined():
    source = ROOT / 'api-ref' / 'source'
    defined = set(yaml.safe_load((source / 'parameters.yaml').read_text()))
    used = set()
    for inc in source.glob('*.inc'):
        used |= set(re.findall(r'^\s+- [\w.]+: ([\w.]+)$', inc.read_text(),
                               re.M))
        assert inc.name in (source / 'index.rst').read_text()
    assert used and used <= defined, used - defined


def test_worker_console_scripts_and_extras():
    scripts = entry_points('console_scripts')
    from zaqar_delay.worker import cli
    assert scripts['zaqar-delay-worker'].load() is cli.worker_main
    assert scripts['zaqar-delay-dead-letters'].load() is \
        cli.dead_letters_main
    extras = metadata.metadata('zaqar-delay').get_all('Provides-Extra')
    assert {'worker', 'prometheus'} <= set(extras)


def test_persistent_consumer_entry_points_are_declared():
    """setup.cfg declares the console script and the no-op notification
    task for ``cursor:`` subscribers (read from setup.cfg, so the test
    holds before a venv is reinstalled)."""
    parser = configparser.ConfigParser()
    parser.read(ROOT / 'setup.cfg')
    declared = {}
    for group in ('console_scripts', 'zaqar.notification.tasks'):
        for line in parser['options.entry_points'][group].strip().splitlines():
            name, target = (part.strip() for part in line.split('='))
            declared[group, name] = target
    for key, expected in {
            ('console_scripts', 'zaqar-delay-consumers'):
                ('zaqar_delay.cmd.consumers', 'main'),
            ('zaqar.notification.tasks', 'cursor'):
                ('zaqar_delay.consumers', 'NotificationTask')}.items():
        module, attribute = declared[key].split(':')
        assert (module, attribute) == expected
        assert getattr(importlib.import_module(module), attribute)


def test_the_local_servers_are_not_installed_with_the_driver():
    """localstack/ (and the tests, tools and benchmarks that use it) stay
    in the repository: setup.cfg's package list holds the driver only."""
    import setuptools
    setup_cfg = configparser.ConfigParser()
    setup_cfg.read(ROOT / 'setup.cfg')
    assert setup_cfg['options']['packages'].strip() == 'find:'
    include = setup_cfg['options.packages.find']['include'].split()
    packages = setuptools.find_packages(str(ROOT), include=include)
    assert 'zaqar_delay' in packages
    # The driver and its tempest plugin, nothing else.
    assert {package.split('.')[0] for package in packages} == {
        'zaqar_delay', 'zaqar_delay_tempest_plugin'}


def test_a_wheel_built_from_the_tree_carries_the_lua_and_entry_points(
        tmp_path):
    """``pip install /path/to/zaqar-delay`` (README) installs a built
    wheel, not the tree: the Redis scripts must travel in it. Built from
    a copy, so the tree gets no build output."""
    source = tmp_path / 'source'
    source.mkdir()
    for name in ('setup.py', 'setup.cfg', 'README.md', 'LICENSE'):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, source / name)
    for package in ('zaqar_delay', 'zaqar_delay_tempest_plugin'):
        shutil.copytree(ROOT / package, source / package,
                        ignore=shutil.ignore_patterns('__pycache__'))
    subprocess.run(
        [sys.executable, '-m', 'pip', 'wheel', '--no-deps',
         '--no-build-isolation', '--no-index', '-q', '-w',
         str(tmp_path / 'dist'), str(source)], check=True,
        capture_output=True)
    wheel, = (tmp_path / 'dist').glob('zaqar_delay-*.whl')
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points_txt, = [n for n in names
                             if n.endswith('.dist-info/entry_points.txt')]
        declared = archive.read(entry_points_txt).decode()
    scripts = {path.relative_to(ROOT).as_posix() for path in
               (ROOT / 'zaqar_delay').glob('drivers/*/lua/*.lua')}
    assert scripts and scripts <= names, scripts - names
    assert not any(n.startswith(('tests/', 'localstack/', 'benchmarks/'))
                   for n in names)
    for backend in BACKENDS:
        assert 'delay.%s = ' % backend in declared
