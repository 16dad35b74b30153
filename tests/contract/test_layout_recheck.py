"""A gc pass reads the store's layout version again before it touches a
queue: a host still running when ``zaqar-delay-migrate --upgrade-layout``
of a later release raised the version stops there, instead of taking what
that layout writes for drafts or strays of its own and removing them."""

import json

import pytest

from tests.contract.helpers import post
from zaqar_delay import errors


def raise_layout_version(driver):
    """What an upgrade to a later layout does last, on each backend: the
    store's version one above this driver's. Returns what puts it back."""
    module = type(driver).__module__
    if module.endswith('swift.driver'):
        from zaqar_delay.drivers.swift import driver as swift_driver
        from zaqar_delay.drivers.swift import names

        def write(version):
            driver.store.put(names.LAYOUT_CONTAINER, names.LAYOUT_OBJ,
                             json.dumps({'v': version}).encode())
        current = swift_driver.LAYOUT_VERSION
    elif module.endswith('redis.driver'):
        from zaqar_delay.drivers.redis import layout

        def write(version):
            driver.connection.set(layout.LAYOUT_KEY, version)
        current = layout.CURRENT
    else:
        from zaqar_delay.drivers.mongodb import driver as mongodb_driver
        from zaqar_delay.drivers.mongodb import fields

        def write(version):
            driver.database[fields.LAYOUT].update_one(
                {'_id': fields.LAYOUT_ID}, {'$set': {'v': version}})
        current = mongodb_driver.LAYOUT_VERSION
    write(current + 1)
    return lambda: write(current)


def watch_queue_visits(driver, monkeypatch):
    """The queues gc settles, as each backend settles one, in a list."""
    visited = []
    if type(driver).__module__.endswith('swift.driver'):
        original = driver._gc_queue

        def settle(container, *rest):
            visited.append(container)
            return original(container, *rest)
        monkeypatch.setattr(driver, '_gc_queue', settle)
    else:
        original = driver.message_controller.gc

        def settle(queue, project, *rest):
            visited.append((project, queue))
            return original(queue, project, *rest)
        monkeypatch.setattr(driver.message_controller, 'gc', settle)
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
