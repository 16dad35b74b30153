"""The Swift layout version: an object in the account's ``zd:layout``
container, written on the driver's first call, a newer one refused."""

import json

import pytest

from zaqar_delay import errors
from zaqar_delay.drivers.swift import driver as swift_driver
from zaqar_delay.drivers.swift import names


def test_first_use_writes_the_version_and_a_newer_one_is_refused(
        driver, project):
    driver.message_controller.stats('q', project)
    _, found = driver.store.get_json(names.LAYOUT_CONTAINER, names.LAYOUT_OBJ)
    assert found == {'v': swift_driver.LAYOUT_VERSION}
    newer = swift_driver.LAYOUT_VERSION + 1
    driver.store.put(names.LAYOUT_CONTAINER, names.LAYOUT_OBJ,
                     json.dumps({'v': newer}).encode())
    try:
        with pytest.raises(errors.LayoutMismatch,
                           match='Swift store has layout version {}.*newer'
                           .format(newer)):
            swift_driver.check_layout(driver.store)
    finally:
        # The account is shared by the session's other Swift tests.
        driver.store.put(names.LAYOUT_CONTAINER, names.LAYOUT_OBJ,
                         json.dumps({'v': swift_driver.LAYOUT_VERSION})
                         .encode())
