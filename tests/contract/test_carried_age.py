"""A message carried over from another store (zaqar-delay-migrate) keeps
its age: every backend stamps created = now - age_ms and counts ttl and
delay from created, so its remaining ttl and delay are what they were."""

import json
import uuid

from tests.contract.helpers import (CLIENT, bodies, claimed_bodies,
                                    listed, stats)
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


def carry_old_and_young(driver, make_queue, project):
    """A queue kept 60 s by its ``_retention``, with a message carried in
    70 s old (past that) and one 10 s old: their positions are new, their
    ages are not."""
    queue = make_queue({'_retention': {'time': 60}})
    # Ids are unique in a project, as migrated ones are.
    driver.message_controller._insert(queue, project, [
        carried(str(uuid.uuid4()), 'old', 300, 0, 70_000),
        carried(str(uuid.uuid4()), 'young', 300, 0, 10_000),
    ], str(CLIENT))
    return queue


def removed(driver, queue, project):
    return driver.message_controller.stats(queue, project)[
        'retention']['removed']


def test_a_message_carried_in_past_time_is_never_taken(
        driver, clock, make_queue, project):
    # SPEC §5: past ``time`` a message is not kept, whatever its
    # position: no read shows it, no claim or pop hands it out.
    messages = driver.message_controller
    queue = carry_old_and_young(driver, make_queue, project)
    assert bodies(listed(driver, queue, project)) == ['young']
    counts = messages.stats(queue, project)['messages']
    assert (counts['total'], counts['oldest']['age']) == (1, 10)
    assert claimed_bodies(driver, queue, project) == ['young']
    popped = carry_old_and_young(driver, make_queue, project)
    assert bodies(messages.pop(popped, 10, project=project)) == ['young']
    assert messages.pop(popped, 10, project=project) == []
    # Removed by the take or by the cleanup, and counted once either way.
    for name, left in ((queue, 1), (popped, 0)):
        messages.clean(name, project, 10)
        assert removed(driver, name, project) == 1
        assert stats(driver, name, project)['total'] == left


def test_cleanup_removes_a_message_carried_in_past_time(
        driver, clock, make_queue, project):
    messages = driver.message_controller
    queue = carry_old_and_young(driver, make_queue, project)
    for _ in range(10):
        if not messages.clean(queue, project, 10)[1]:
            break
    assert removed(driver, queue, project) == 1
    assert messages.clean(queue, project, 10) == (0, False)
    assert removed(driver, queue, project) == 1
    assert bodies(listed(driver, queue, project,
                         include_claimed=True)) == ['young']
    assert stats(driver, queue, project)['total'] == 1
    # 50 s on, the young one is past time too, its position still newer
    # than anything posted 60 s ago.
    clock.advance(50)
    assert listed(driver, queue, project) == []
    # (MongoDB's reads remove what they no longer keep: clean may find
    # nothing left to do.)
    messages.clean(queue, project, 10)
    assert removed(driver, queue, project) == 2
    assert claimed_bodies(driver, queue, project) == []
