"""The Swift layout version: an object in the account's ``zd:layout``
container, written on the driver's first call, a newer one refused; and
what ``zaqar-delay-migrate --upgrade-layout`` does on Swift."""

import io
import uuid

import pytest

from localstack import backends
from localstack import zaqar_server
from localstack.factories import swift as swift_factory
from tests.contract.helpers import raise_layout_version
from zaqar_delay import errors
from zaqar_delay import rules
from zaqar_delay.drivers.swift import carried
from zaqar_delay.drivers.swift import driver as swift_driver
from zaqar_delay.drivers.swift import layout
from zaqar_delay.drivers.swift import names
from zaqar_delay.migrate import cli


def test_first_use_writes_the_version_and_a_newer_one_is_refused(
        driver, project):
    driver.message_controller.stats('q', project)
    _, found = driver.store.get_json(names.LAYOUT_CONTAINER, names.LAYOUT_OBJ)
    assert found == {'v': layout.CURRENT}
    newer = layout.CURRENT + 1
    # The account is shared by the session's other Swift tests.
    put_back = raise_layout_version(driver)
    try:
        with pytest.raises(errors.LayoutMismatch,
                           match='Swift store has layout version {}.*newer'
                           .format(newer)):
            layout.check(driver.store)
    finally:
        put_back()


def test_the_upgrade_command_marks_what_an_earlier_release_carried_in(
        driver, make_queue, project, swift_server, redis_url, tmp_path,
        monkeypatch):
    # zaqar-delay-migrate --upgrade-layout on a Swift store: what inserts
    # before 2026-12-06 carried in has no y/ mark (carried.py).
    queue = make_queue()
    monkeypatch.setattr(carried, 'mark', lambda qs, messages, now: None)
    driver.message_controller._insert(queue, project, [rules.NewMessage(
        id=str(uuid.uuid4()), ttl=300, delay=0, body='old',
        body_json='"old"', age_ms=120_000)], str(uuid.uuid4()))
    monkeypatch.undo()
    monkeypatch.setattr(cli.logging, 'setup', lambda *a: None)
    config = zaqar_server.write_config(
        str(tmp_path), redis_url, 0, 'delay.swift',
        {'uri': swift_factory.swift_uri(swift_server)})
    out = io.StringIO()
    assert cli.main(['--config-file', config, '--upgrade-layout'],
                    out=out) == 0
    assert ('marked 1 messages carried in without a mark (1 marks)'
            in out.getvalue())
    qs = driver.queue_state(queue, project)
    assert len(driver.store.listing_all(qs.c, 'y/')) == 1


def test_an_account_without_queues_gets_this_codes_version(
        swift_server, conf, redis_url, monkeypatch):
    # The reseller admin's account: no test keeps queues there. Played by
    # a release one layout ahead, so that the version written cannot be
    # the 1 that an account holding queues without one gets
    # (tests/contract/test_layout_upgrade.py).
    conf.set_override('uri', swift_factory.swift_uri(
        swift_server, swift_server.admin_user, swift_server.admin_key),
        group=swift_factory.GROUP)
    empty = swift_driver.DataDriver(
        conf, None, backends.control_driver(conf, redis_url))
    monkeypatch.setattr(layout, 'CURRENT', layout.CURRENT + 1)
    try:
        assert not empty.store.containers(
            names.container_prefix(names.MESSAGES))
        _, found = empty.store.get_json(names.LAYOUT_CONTAINER,
                                        names.LAYOUT_OBJ)
        assert found == {'v': layout.CURRENT}
    finally:
        # Left empty of a version for the next run on this server.
        empty.store.delete(names.LAYOUT_CONTAINER, names.LAYOUT_OBJ)
        empty.close()
