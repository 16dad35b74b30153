"""The API reference, the documentation tree and the release notes
build, warnings as errors.

Sphinx, os-api-ref and reno live in their own venv (``.venv-docs``, made
by ``scripts/setup.sh test``; ``ZD_DOCS_VENV`` overrides), away from
Zaqar's pins.
"""

import os
import pathlib
import subprocess
import sysconfig

import pytest

from tests import conftest

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope='module')
def docs_bin():
    venv = pathlib.Path(os.environ.get('ZD_DOCS_VENV',
                                       ROOT / '.venv-docs'))
    if not (venv / 'bin' / 'sphinx-build').exists():
        conftest.unavailable('{} has no sphinx-build: run scripts/setup.sh '
                             'test (or set ZD_DOCS_VENV)'.format(venv))
    return venv / 'bin'


def run(*command, env=None):
    result = subprocess.run([str(part) for part in command], cwd=ROOT,
                            capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def sphinx_build(docs_bin, source, out, env=None):
    run(docs_bin / 'sphinx-build', '-W', '--keep-going', '-q', '-E',
        '-b', 'html', ROOT / source, out, env=env)


def test_api_ref_builds_without_warnings(docs_bin, tmp_path):
    sphinx_build(docs_bin, 'api-ref/source', tmp_path)
    assert (tmp_path / 'index.html').exists()


def test_documentation_builds_without_warnings(docs_bin, tmp_path):
    # The configuration reference imports zaqar_delay and Zaqar: from this
    # venv, after the docs venv's own packages (doc/source/conf.py).
    env = dict(os.environ,
               ZD_DOCS_SITE_PACKAGES=sysconfig.get_paths()['purelib'])
    sphinx_build(docs_bin, 'doc/source', tmp_path, env=env)
    reference = (tmp_path / 'configuration' / 'index.html').read_text()
    assert 'consumer_idle_time' in reference and 'full_scan_time' in reference
    # Every page the README's Guides table lists (docs/*.md) is on the
    # site too, through its stub in doc/source/design.
    built = {page.stem for page in (tmp_path / 'design').glob('*.html')}
    assert {page.stem for page in (ROOT / 'docs').glob('*.md')} <= built
    assert (tmp_path / '_images' /
            'claim-latency-vs-delayed-backlog.png').exists()


@pytest.fixture
def full_git_history():
    """reno reads the notes from git history, which it needs whole."""
    probe = subprocess.run(['git', 'rev-parse', '--is-shallow-repository'],
                           cwd=ROOT, capture_output=True, text=True)
    if probe.returncode != 0:
        conftest.unavailable('release notes need a git checkout: reno reads '
                             'them from git history')
    if probe.stdout.strip() == 'true':
        conftest.unavailable('this clone is shallow and reno cannot read '
                             'shallow history: run `git fetch --unshallow` '
                             'or clone without --depth')


def test_release_notes_lint_and_build(docs_bin, full_git_history, tmp_path):
    run(docs_bin / 'reno', 'lint')
    report = run(docs_bin / 'reno', 'report')
    tracked = run('git', 'ls-files', 'releasenotes/notes').split()
    assert tracked
    # reno only sees committed notes; each one must be in the report.
    for note in tracked:
        assert '.. {} @ '.format(note) in report, note
    sphinx_build(docs_bin, 'releasenotes/source', tmp_path)
    assert (tmp_path / 'index.html').exists()
