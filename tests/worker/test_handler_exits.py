"""Handlers that raise what ``except Exception`` does not catch, against a
live zaqar-server on our Redis driver."""

import asyncio

import pytest

from tests.worker.helpers import make_app
from tests.worker.helpers import wait_for

pytestmark = pytest.mark.integration


@pytest.mark.parametrize('exit_type', [asyncio.CancelledError, SystemExit,
                                       KeyboardInterrupt])
def test_a_handler_that_exits_fails_its_attempt_and_frees_its_slot(
        zaqar_url, project, exit_type):
    app = make_app(zaqar_url, project)
    attempts, handled = [], []

    def handle(event):
        if event['n'] == 0:
            attempts.append(event)
            raise exit_type()
        handled.append(event['n'])

    # One slot: a slot the exit kept would stop the type for good.
    app.add_handler('Exits', handle, parallelism=1, max_attempts=2,
                    retry_delay=1)
    app.start()
    try:
        [exited] = app.enqueue_many([{'n': 0}], type='Exits')
        assert wait_for(lambda: attempts, 20)
        app.enqueue_many([{'n': n} for n in (1, 2, 3)], type='Exits')
        assert wait_for(lambda: len(handled) == 3, 20), handled
        # Released for its retry, then dead-lettered after its last attempt.
        assert wait_for(lambda: [d.id for d in app.dead_letters('Exits')]
                        == [exited], 20)
        assert len(attempts) == 2
    finally:
        closed = app.close(10)
    assert closed is True
    assert sorted(handled) == [1, 2, 3]
    stats = app.connection.stats('t-Exits')
    assert (stats['claimed'], stats['total']) == (0, 0)
    assert app.counts.snapshot('Exits') == {
        'enqueued': 4, 'handled': 3, 'failed': 2, 'retried': 1,
        'dead_lettered': 1}
