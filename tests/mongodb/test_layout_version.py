"""The MongoDB layout version: a document in the ``layout`` collection,
written on the driver's first use of a database, a newer one refused."""

import pytest

from zaqar_delay import errors
from zaqar_delay.drivers.mongodb import driver as mongodb_driver
from zaqar_delay.drivers.mongodb import fields


def layout_collection(driver):
    """The collection, reached without the driver's checked database."""
    return driver.connection[driver.store_conf.database][fields.LAYOUT]


def test_first_use_writes_the_version(driver, project):
    driver.message_controller.stats('q', project)
    assert layout_collection(driver).find_one(
        {'_id': fields.LAYOUT_ID})['v'] == mongodb_driver.LAYOUT_VERSION
    # A second look keeps it (an upsert only inserts).
    mongodb_driver.check_layout(driver.database)
    assert layout_collection(driver).count_documents({}) == 1


def test_a_newer_layout_is_refused(driver, project):
    newer = mongodb_driver.LAYOUT_VERSION + 1
    layout_collection(driver).insert_one({'_id': fields.LAYOUT_ID,
                                          'v': newer})
    with pytest.raises(errors.LayoutMismatch,
                       match='MongoDB store has layout version {}.*newer'
                       .format(newer)):
        driver.message_controller.stats('q', project)
