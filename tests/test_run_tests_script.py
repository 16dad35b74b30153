"""scripts/run-tests.sh (what scripts/test.sh runs after setting up):
the README's worker count and its temporary-directory rule.

A stand-in interpreter under ZD_VENV records the arguments and TMPDIR
the script hands it, so no test suite runs inside this one."""

import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, 'scripts', 'run-tests.sh')
SHM_ROOM = 4 * 1024 ** 3


@pytest.fixture
def fake_venv(tmp_path):
    record = tmp_path / 'record'
    python = tmp_path / 'venv' / 'bin' / 'python'
    python.parent.mkdir(parents=True)
    python.write_text('#!/bin/sh\n'
                      'printf "%s\\n" "TMPDIR=${TMPDIR:-}" "$@" > '
                      + str(record) + '\n')
    python.chmod(0o755)
    return tmp_path / 'venv', record


def run(fake_venv, shm_free_kib=None, **env):
    """Run the script; with ``shm_free_kib``, ``df`` reports that much
    free on /dev/shm. Returns (TMPDIR, the interpreter's arguments)."""
    venv, record = fake_venv
    environ = {k: v for k, v in os.environ.items()
               if k not in ('TMPDIR', 'ZD_TEST_WORKERS')}
    environ.update(env, ZD_VENV=str(venv))
    if shm_free_kib is not None:
        df = venv / 'df' / 'df'
        df.parent.mkdir(exist_ok=True)
        df.write_text('#!/bin/sh\n'
                      'echo "Filesystem 1024-blocks Used Available '
                      'Capacity Mounted on"\n'
                      'echo "shm 99999999 0 %d 0%% /dev/shm"\n'
                      % shm_free_kib)
        df.chmod(0o755)
        environ['PATH'] = str(df.parent) + os.pathsep + environ['PATH']
    subprocess.run(['bash', SCRIPT, 'tests/contract', '-x'], env=environ,
                   check=True, timeout=30)
    tmpdir, *args = record.read_text().splitlines()
    return tmpdir.partition('=')[2], args


def workers(args):
    return args[args.index('-n') + 1]


def shm_has_room():
    return (os.access('/dev/shm', os.W_OK)
            and shutil.disk_usage('/dev/shm').free > SHM_ROOM)


def shm_writable():
    return os.access('/dev/shm', os.W_OK)


def test_two_workers_by_default_and_the_arguments_reach_pytest(fake_venv):
    tmpdir, args = run(fake_venv)
    assert args[:2] == ['-m', 'pytest']
    assert workers(args) == '2'
    assert args[args.index('--dist') + 1] == 'loadgroup'
    assert args[-2:] == ['tests/contract', '-x']


@pytest.mark.parametrize('count', ['0', '3'])
def test_zd_test_workers_sets_the_count(fake_venv, count):
    assert workers(run(fake_venv, ZD_TEST_WORKERS=count)[1]) == count


def test_dev_shm_only_when_tmpdir_is_unset_and_it_has_room(fake_venv):
    # This machine's /dev/shm decides which answer is right; both are
    # the rule (docs: README, the test command's paragraph).
    tmpdir, _ = run(fake_venv)
    assert tmpdir == ('/dev/shm' if shm_has_room() else '')


def test_dev_shm_needs_more_than_4_gib_free(fake_venv):
    # What df reports decides, whatever this machine's /dev/shm holds.
    just_enough = SHM_ROOM // 1024 + 1
    assert run(fake_venv, shm_free_kib=just_enough)[0] == (
        '/dev/shm' if shm_writable() else '')
    assert run(fake_venv, shm_free_kib=SHM_ROOM // 1024)[0] == ''
    assert run(fake_venv, shm_free_kib=64 * 1024)[0] == ''


def test_a_tmpdir_given_is_kept(fake_venv, tmp_path):
    chosen = str(tmp_path / 'mine')
    assert run(fake_venv, TMPDIR=chosen)[0] == chosen
