"""The mover's own bounds, with a source and a target in memory."""

import uuid

from zaqar_delay.migrate import mover
from zaqar_delay.migrate import sources


class ListSource:
    """A source of ``n`` live messages."""

    def __init__(self, n):
        now = mover.now_ms()
        self.messages = [sources.SourceMessage(
            id=uuid.uuid4().hex, body='x', created_ms=now,
            expires_ms=now + 3_600_000, due_ms=now, client_uuid='c')
            for _ in range(n)]

    def page(self, queue, project, marker, limit):
        start = marker or 0
        page = self.messages[start:start + limit]
        return (page, start + len(page)) if page else ([], None)

    def subscriptions(self, queue, project):
        return iter(())


class EmptyTarget:
    """A target that lost every message."""

    class message_controller:
        @staticmethod
        def bulk_get(queue, ids, project=None):
            return []

        @staticmethod
        def carried_in(queue, project, ids):
            return set()

    subscription_controller = None


class Quiet:
    def add(self, count, what):
        pass


def test_a_verify_keeps_only_the_differences_it_shows():
    """A target that lost a queue of N messages: verify kept every one of
    the N difference strings (only 10 are printed, and the count), so
    the command's memory grew with the queue."""
    work = mover.Mover(ListSource(2_000), EmptyTarget, 100, Quiet())
    report = work.verify('q', 'p', mover.QueueReport('p', 'q'))
    assert report.difference_count == 2_000
    assert len(report.differences) == mover.SHOWN_DIFFERENCES
    assert '2000 differences' in report.line()
