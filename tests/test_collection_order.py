"""The order and groups tests/conftest.py gives the collected tests: the
Keystone group first, upstream's tempest run started before the group's
other tests and checked after them, then the slow tests; one xdist group
for the Keystone tests and one per module with a module-scoped fixture."""

import types

import pytest

from tests import conftest


class Item:
    def __init__(self, nodeid, keystone=None, slow=False, scope='function'):
        self.nodeid = nodeid
        self.markers = {}
        if keystone is not None:
            self.markers['keystone'] = types.SimpleNamespace(kwargs=keystone)
        if slow:
            self.markers['slow'] = types.SimpleNamespace(kwargs={})
        self._fixtureinfo = types.SimpleNamespace(name2fixturedefs={
            'server': [types.SimpleNamespace(scope=scope)]})
        self.groups = []

    def get_closest_marker(self, name):
        return self.markers.get(name)

    def add_marker(self, marker):
        assert marker.mark.name == 'xdist_group'
        self.groups.append(marker.mark.args[0])


def test_keystone_group_first_tempest_around_it_then_slow_tests():
    plain = Item('tests/test_a.py::test_plain')
    served = Item('tests/integration/test_i.py::test_served', scope='module')
    slow = Item('tests/worker/test_w.py::test_slow', slow=True)
    # Tempest's module has a module-scoped server: the Keystone group
    # still takes it.
    check = Item('tests/tempest/test_t.py::test_check', {'order': 1},
                 scope='module')
    other = Item('tests/test_k.py::test_keystone', {})
    start = Item('tests/tempest/test_t.py::test_start', {'order': -1},
                 scope='module')
    items = [plain, served, slow, check, other, start]
    conftest.pytest_collection_modifyitems(items)
    assert items == [start, other, check, slow, plain, served]
    assert [item.groups for item in items] == [
        ['keystone'], ['keystone'], ['keystone'], [], [],
        ['tests/integration/test_i.py']]


@pytest.mark.parametrize('scope', ['function', 'session'])
def test_a_module_without_a_module_scoped_fixture_is_not_grouped(scope):
    item = Item('tests/test_b.py::test_b', scope=scope)
    conftest.pytest_collection_modifyitems([item])
    assert item.groups == []
