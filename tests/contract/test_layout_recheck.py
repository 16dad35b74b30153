"""A gc pass reads the store's layout version again before it touches a
queue: a host still running when ``zaqar-delay-migrate --upgrade-layout``
of a later release raised the version stops there, instead of taking what
that layout writes for drafts or strays of its own and removing them."""

import pytest

from tests.contract.helpers import around_queue_gc
from tests.contract.helpers import post
from tests.contract.helpers import raise_layout_version
from zaqar_delay import errors


def watch_queue_visits(driver, monkeypatch):
    """The queues gc settles, in a list."""
    visited = []

    def watch(key, step):
        visited.append(key)
        return step()
    around_queue_gc(driver, monkeypatch, watch)
    return visited


def test_gc_on_a_store_upgraded_under_it_stops_before_any_queue(
        driver, make_queue, project, monkeypatch):
    post(driver, make_queue(), project, 'kept')
    visited = watch_queue_visits(driver, monkeypatch)
    put_back = raise_layout_version(driver)
    try:
        # zaqar-delay-gc's pass, then Zaqar's own gc() hook: both refuse,
        # saying why, and neither settles a queue.
        for gc_pass in (driver.exclusive_gc, driver.gc):
            with pytest.raises(errors.LayoutMismatch,
                               match='newer than the .* this zaqar-delay '
                                     'knows'):
                gc_pass()
        assert visited == []
    finally:
        put_back()
    # With the version this driver reads, the same pass settles queues
    # (the watch sees them).
    driver.exclusive_gc()
    assert visited
