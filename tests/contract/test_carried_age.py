"""A message carried over from another store (zaqar-delay-migrate) keeps
its age: every backend stamps created = now - age_ms and counts ttl and
delay from created, so its remaining ttl and delay are what they were."""

import json

from tests.contract.helpers import CLIENT, claimed_bodies, listed
from zaqar_delay import rules


def carried(message_id, body, ttl, delay, age_ms):
    return rules.NewMessage(id=message_id, ttl=ttl, delay=delay, body=body,
                            body_json=json.dumps(body), age_ms=age_ms)


def test_a_carried_message_keeps_its_age_ttl_and_delay(driver, clock,
                                                       make_queue, project):
    queue = make_queue({'_default_message_delay': 60})
    driver.message_controller._insert(queue, project, [
        # Created 100 s ago, ttl 300: 200 s left; due 10 s ago.
        carried('old-due', 'old', 300, 90, 100_000),
        # Created 30 s ago with a 120 s delay: due in 90 s.
        carried('old-delayed', 'late', 300, 120, 30_000),
    ], str(CLIENT))
    found = {m['id']: m for m in listed(driver, queue, project,
                                        include_delayed=True)}
    assert (found['old-due']['age'], found['old-due']['ttl']) == (100, 300)
    assert found['old-delayed']['age'] == 30
    first = driver.message_controller.first(queue, project)
    assert first['id'] == 'old-due' and first['age'] == 100
    assert [m['id'] for m in listed(driver, queue, project)] == ['old-due']
    clock.advance(90)
    assert [m['id'] for m in listed(driver, queue, project)] == [
        'old-due', 'old-delayed']
    clock.advance(111)
    # 201 s after the insert: past the first one's remaining 200 s.
    assert [m['id'] for m in listed(driver, queue, project,
                                    include_delayed=True)] == ['old-delayed']
    assert claimed_bodies(driver, queue, project) == ['late']
