"""gc isolates queues: one that fails is logged with its name and the
reason and skipped; the others are still cleaned in the same pass."""

import logging

import pytest

from tests.contract.helpers import around_queue_gc
from tests.contract.helpers import post
from zaqar_delay.driver import VISIT_STEPS


def break_gc_of(driver, queue, project, monkeypatch):
    """Make the settling of one queue fail, the way each backend settles."""
    if driver.__module__.endswith('swift.driver'):
        from zaqar_delay.drivers.swift import names
        broken = names.container(names.MESSAGES, queue, project)
    else:
        broken = (queue, project)

    def settle(key, step):
        if key == broken:
            raise RuntimeError('corrupt queue state')
        return step()
    around_queue_gc(driver, monkeypatch, settle)


@pytest.mark.parametrize('broken_first', [True, False])
def test_a_failing_queue_does_not_stop_gc(driver, make_queue, project,
                                          clock, monkeypatch, caplog,
                                          broken_first):
    queues = [make_queue(name=name) for name in ('q-a', 'q-b')]
    for queue in queues:
        post(driver, queue, project, 'old', ttl=60)
    broken = queues[0] if broken_first else queues[1]
    break_gc_of(driver, broken, project, monkeypatch)
    clock.advance(61)
    with caplog.at_level(logging.ERROR):
        result = driver.gc()
    # The other queue's message is gone; the pass reports the failed one.
    assert result.expired >= 1
    assert result.skipped == 1 and result.queues >= 2
    errors = [r.getMessage() for r in caplog.records
              if r.levelno >= logging.ERROR]
    assert any('corrupt queue state' in text and broken in text
               for text in errors), errors


def test_queues_names_every_queue_with_messages(driver, make_queue, project):
    """The index of queues the metrics exporter reads (driver.queues()):
    each backend's own, with the project and queue as they were given."""
    queues = [make_queue(name=name) for name in ('q-a', 'q.b_c')]
    for queue in queues:
        post(driver, queue, project, 'x')
    assert {(project, queue) for queue in queues} <= set(driver.queues())


def busy_cleanup(driver, busy, monkeypatch, batches):
    """Make the retention cleanup of queue ``busy`` find a full batch
    ``batches`` times (None: always, as when its tenant posts as fast as
    gc removes); returns the batches taken in each visit of it."""
    per_visit, left = [], [batches]
    clean_queue, clean = driver.clean_queue, driver.message_controller.clean

    def visit(queue, project):
        if queue == busy:
            per_visit.append(0)
        return clean_queue(queue, project)

    def cleanup(queue, project, batch):
        if queue != busy:
            return clean(queue, project, batch)
        per_visit[-1] += 1
        if per_visit[-1] > 100:
            raise RuntimeError('one visit never stopped cleaning')
        if left[0] is not None:
            left[0] -= 1
        return batch, left[0] is None or left[0] > 0

    monkeypatch.setattr(driver, 'clean_queue', visit)
    monkeypatch.setattr(driver.message_controller, 'clean', cleanup)
    return per_visit


def test_a_long_cleanup_is_taken_in_rounds(driver, make_queue, project,
                                           clock, monkeypatch):
    """A queue with 25 batches to clean gets VISIT_STEPS of them a visit,
    and its next visit comes after every other queue's (here one with an
    expired message to drop), in the same pass."""
    busy = make_queue(name='q-a-busy')
    post(driver, busy, project, 'kept', ttl=3600)
    post(driver, make_queue(name='q-b-other'), project, 'old', ttl=60)
    clock.advance(61)
    per_visit = busy_cleanup(driver, busy, monkeypatch, 25)
    result = driver.gc()
    assert per_visit == [VISIT_STEPS, VISIT_STEPS, 5]
    assert result.skipped == 0 and result.expired >= 1
    assert result.visits == result.queues + 2


def test_a_queue_whose_cleanup_never_ends_does_not_hold_gc(
        driver, make_queue, project, clock, monkeypatch):
    """One tenant's queue cannot stop gc: a visit stops at VISIT_STEPS
    batches, the other queues are visited, and the pass ends once it is
    ``full_scan_time`` old; the next pass goes on. (A visit once cleaned
    until a batch came back short: for ever, here.)"""
    driver.conf.set_override('full_scan_time', 0.2, group='retention')
    busy = make_queue(name='q-a-busy')
    post(driver, busy, project, 'kept', ttl=3600)
    post(driver, make_queue(name='q-b-other'), project, 'old', ttl=60)
    clock.advance(61)
    per_visit = busy_cleanup(driver, busy, monkeypatch, None)
    result = driver.gc()
    assert per_visit and set(per_visit) == {VISIT_STEPS}
    assert result.skipped == 0 and result.expired >= 1


def test_gc_settles_a_queue_whose_stored_delay_a_lowered_bound_refuses(
        driver, make_queue, project, clock):
    # Bounds never break Zaqar's gc: a queue whose metadata the operator's
    # new limits refuse is settled like any other.
    dlq = make_queue()
    queue = make_queue({'_default_message_delay': 300,
                        '_max_claim_count': 1, '_dead_letter_queue': dlq})
    post(driver, queue, project, 'gone', ttl=60, delay=0)
    post(driver, queue, project, 'kept', ttl=3600, delay=0)
    driver.conf.set_override('max_message_delay', 60, group='transport')
    clock.advance(61)
    result = driver.gc()
    assert result.skipped == 0 and result.expired >= 1
    assert [m['body'] for m in driver.message_controller.pop(
        queue, 5, project=project)] == ['kept']
