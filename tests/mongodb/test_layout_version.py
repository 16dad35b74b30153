"""The MongoDB layout version: a document in the ``layout`` collection,
written on the driver's first use of a database, a newer one refused."""

import pytest

from zaqar_delay import errors
from zaqar_delay.drivers.mongodb import fields
from zaqar_delay.drivers.mongodb import layout


def layout_collection(driver):
    """The collection, reached without the driver's checked database."""
    return driver.connection[driver.store_conf.database][fields.LAYOUT]


def test_first_use_writes_the_version(driver, project):
    driver.message_controller.stats('q', project)
    assert layout_collection(driver).find_one(
        {'_id': fields.LAYOUT_ID})['v'] == layout.CURRENT
    # A second look keeps it (an upsert only inserts).
    layout.check(driver.database)
    assert layout_collection(driver).count_documents({}) == 1


def test_a_newer_layout_is_refused(driver, project):
    newer = layout.CURRENT + 1
    layout_collection(driver).insert_one({'_id': fields.LAYOUT_ID,
                                          'v': newer})
    with pytest.raises(errors.LayoutMismatch,
                       match='MongoDB store has layout version {}.*newer'
                       .format(newer)):
        driver.message_controller.stats('q', project)


def test_an_empty_database_gets_this_codes_version(driver, project,
                                                   monkeypatch):
    # Played by a release one layout ahead, so that the version it writes
    # cannot be the 1 that a database holding queues without one gets
    # (tests/contract/test_layout_upgrade.py).
    monkeypatch.setattr(layout, 'CURRENT', layout.CURRENT + 1)
    driver.message_controller.stats('q', project)
    assert layout_collection(driver).find_one(
        {'_id': fields.LAYOUT_ID})['v'] == layout.CURRENT
