"""gc isolates queues: one that fails is logged with its name and the
reason and skipped; the others are still cleaned in the same pass."""

import logging

import pytest

from tests.contract.helpers import post


def break_gc_of(driver, queue, project, monkeypatch):
    """Make the settling of one queue fail, the way each backend settles."""
    def refuse():
        raise RuntimeError('corrupt queue state')

    if driver.__module__.endswith('swift.driver'):
        from zaqar_delay.drivers.swift import names
        broken = names.container(names.MESSAGES, queue, project)
        original = driver._gc_queue
        monkeypatch.setattr(driver, '_gc_queue', lambda container: (
            refuse() if container == broken else original(container)))
    else:
        original = driver.message_controller.gc
        monkeypatch.setattr(
            driver.message_controller, 'gc',
            lambda q, p, *args: (refuse() if (q, p) == (queue, project)
                                 else original(q, p, *args)))


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
