"""Rolling out a later layout, on every backend: a store one version
behind this code is refused until ``zaqar-delay-migrate --upgrade-layout``
(run by this code) has upgraded it and recorded the new version; a store
holding queues and no version is taken for layout 1, never for the
current one. Each test plays the next release by raising the backend's
``layout.CURRENT``."""

import io

import pytest

from tests.contract.helpers import another_node
from tests.contract.helpers import layout_module
from tests.contract.helpers import post
from tests.contract.helpers import write_layout_version
from zaqar_delay import errors
from zaqar_delay import layout as shared_layout
from zaqar_delay.migrate import cli


@pytest.fixture
def next_release(driver, monkeypatch):
    """Raise this code's layout version by one for the test; the store's
    version is put back afterwards (Redis and Swift stores are shared by
    the session's tests)."""
    layout = layout_module(driver)
    current = layout.CURRENT
    # The test's own driver stays a node of this release: its first use
    # (and version check) comes first.
    driver.recheck_layout()
    monkeypatch.setattr(layout, 'CURRENT', current + 1)
    yield current
    write_layout_version(driver, current)


def open_node(driver, request):
    node = another_node(driver)
    request.addfinalizer(node.close)
    return node


def test_a_store_one_layout_behind_is_refused_until_upgraded(
        driver, make_queue, project, next_release, request):
    queue = make_queue()
    post(driver, queue, project, 'kept')
    earlier, later = next_release, next_release + 1
    # A node of the next release on the store as it is: refused, saying
    # what to run.
    with pytest.raises(errors.LayoutMismatch,
                       match='layout version {} .*needs {}: run '
                             'zaqar-delay-migrate'.format(earlier, later)):
        open_node(driver, request).message_controller.first(queue, project)
    out = io.StringIO()
    assert cli.upgrade_layout(open_node(driver, request), out) == 0
    assert 'upgraded from version {} to {}'.format(
        earlier, later) in out.getvalue()
    node = open_node(driver, request)
    assert node.message_controller.first(queue, project)['body'] == 'kept'
    # Its gc passes read the version too, and go on.
    node.exclusive_gc()
    # Run again, the command finds nothing left to do and says so.
    again = io.StringIO()
    assert cli.upgrade_layout(open_node(driver, request), again) == 0
    assert 'upgraded' not in again.getvalue()
    assert 'version {}'.format(later) in again.getvalue()


def test_the_upgrade_refuses_a_store_of_a_later_layout(
        driver, make_queue, project, next_release, request):
    post(driver, make_queue(), project, 'kept')
    later = next_release + 2
    write_layout_version(driver, later)
    with pytest.raises(SystemExit, match='layout version {} .*newer'
                                         .format(later)):
        cli.upgrade_layout(open_node(driver, request), io.StringIO())
    # The store keeps its version: a node of that release would still
    # read it (write_layout_version's fixture puts it back after).
    with pytest.raises(errors.LayoutMismatch,
                       match='layout version {} '.format(later)):
        open_node(driver, request).message_controller.first(
            make_queue(), project)


def test_a_store_with_queues_and_no_version_is_taken_for_layout_1(
        driver, make_queue, project, monkeypatch, request):
    post(driver, make_queue(), project, 'kept')
    layout = layout_module(driver)
    current = layout.CURRENT
    monkeypatch.setattr(layout, 'CURRENT', shared_layout.UNVERSIONED + 1)
    write_layout_version(driver, None)
    try:
        # Had the missing version been taken for the current one, a node
        # of this layout would misread queues written before versions.
        with pytest.raises(errors.LayoutMismatch,
                           match='layout version {} .*needs {}'.format(
                               shared_layout.UNVERSIONED,
                               shared_layout.UNVERSIONED + 1)):
            open_node(driver, request).message_controller.first(
                make_queue(), project)
    finally:
        write_layout_version(driver, current)
