"""The guard in tests/conftest.py: when pytest-xdist's ``--dist
loadgroup`` could not put a test's group into its id (pytest 9.2 with
xdist 3.8), every test of that worker fails saying so, instead of each
module's servers quietly starting on both workers."""

import pathlib

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests import conftest


class Config:
    def __init__(self, worker=True, loadgroup=True):
        if worker:
            self.workerinput = {}
        self.loadgroup = loadgroup
        self.stash = pytest.Stash()

    def getoption(self, name, default=None):
        return self.loadgroup if name == 'loadgroup' else default


class Item:
    def __init__(self, config, nodeid, grouped=True):
        self.config, self.nodeid, self.grouped = config, nodeid, grouped

    def get_closest_marker(self, name):
        return object() if name == 'xdist_group' and self.grouped else None


def collect(config, items):
    conftest.pytest_collection_finish(
        type('Session', (), {'config': config, 'items': items}))


def test_a_worker_whose_grouped_tests_lost_their_group_fails_each_test():
    config = Config()
    free = Item(config, 'tests/b.py::test_free', grouped=False)
    collect(config, [Item(config, 'tests/a.py::test_one'),
                     Item(config, 'tests/a.py::test_two'), free])
    with pytest.raises(pytest.fail.Exception,
                       match=r'--dist loadgroup did not group 2 tests '
                             r'\(first: tests/a.py::test_one\); see the '
                             r'pin in test-requirements.txt'):
        conftest.pytest_runtest_setup(free)


@pytest.mark.parametrize('worker, loadgroup, nodeid', [
    (True, True, 'tests/a.py::test_one@tests/a.py'),
    (False, True, 'tests/a.py::test_one'),
    (True, False, 'tests/a.py::test_one')],
    ids=['grouped-id', 'not-a-worker', 'not-loadgroup'])
def test_grouped_ids_and_other_runs_fail_nothing(worker, loadgroup, nodeid):
    config = Config(worker, loadgroup)
    item = Item(config, nodeid)
    collect(config, [item])
    conftest.pytest_runtest_setup(item)


def test_the_test_requirements_keep_pytest_below_9_2():
    # The guard above catches the symptom; the pin keeps CI from it.
    root = pathlib.Path(__file__).resolve().parent.parent
    lines = (root / 'test-requirements.txt').read_text().splitlines()
    requirements = [Requirement(line) for line in map(str.strip, lines)
                    if line and not line.startswith(('#', '-'))]
    pins = [r.specifier for r in requirements if r.name == 'pytest']
    assert len(pins) == 1, lines
    assert not pins[0].contains(Version('9.2'), prereleases=True)
    assert pins[0].contains(Version(pytest.__version__), prereleases=True)
