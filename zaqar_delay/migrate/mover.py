"""Moving one queue: messages in batches, then subscriptions, then a
verify pass that may delete what it verified from the source.

Resumable and idempotent by ids: every message keeps its source id in the
target, and the target's ``carry_in`` skips an id it holds or that a
consumer deleted (every target remembers what it carried in until it
expires), so a move killed at any point and run again re-reads the
source and stores only what is missing. The source is never changed
except by ``delete``, which removes only messages whose copy in the
target was read back with the same body, age, remaining ttl and
checksum, or that the target carried in and its consumers removed.
"""

import dataclasses
import itertools
import json
import math
import time

from zaqar_delay import errors
from zaqar_delay import rules

# Differences listed per queue at most (the count says how many in all).
SHOWN_DIFFERENCES = 10
# Ages and ttls are whole seconds, read from two stores' clocks: the
# rounding of both (2 s) and what clocks kept by NTP can drift apart.
CLOCK_SLACK_MS = 5000


@dataclasses.dataclass
class QueueReport:
    project: str
    queue: str
    messages: int = 0        # live messages read from the source
    expired: int = 0         # found expired in the source, not moved
    subscriptions: int = 0
    verified: int = 0        # the same in the target, or consumed there
    consumed: int = 0        # of those verified: consumed there
    deleted: int = 0         # deleted from the source (verified only)
    difference_count: int = 0
    # The first SHOWN_DIFFERENCES only: a target that lost a large queue
    # differs in every message, and the command's memory must not grow
    # with the queue.
    differences: list = dataclasses.field(default_factory=list)
    # Ids the target refused (a difference each, reported by the move).
    refused: set = dataclasses.field(default_factory=set)

    def differ(self, difference):
        self.difference_count += 1
        if len(self.differences) < SHOWN_DIFFERENCES:
            self.differences.append(difference)

    def line(self):
        return ('{}/{}: {} messages ({} expired, skipped), {} '
                'subscriptions, {} verified{}, {} differences, {} deleted '
                'from the source').format(
                    self.project or '', self.queue, self.messages,
                    self.expired, self.subscriptions, self.verified,
                    ' ({} consumed in the target)'.format(self.consumed)
                    if self.consumed else '',
                    self.difference_count, self.deleted)


def now_ms():
    return int(time.time() * 1000)


class Mover:

    def __init__(self, source, target, batch, progress):
        self.source = source
        self.target = target
        self.batch = batch
        self.progress = progress

    def walk(self, queue, project, handle):
        """Call ``handle(page, live)`` for each source page (``live``: its
        messages not expired), following the source's markers; ``handle``
        returns how many of the page it deleted from the source."""
        marker = None
        while True:
            page, next_marker = self.source.page(queue, project, marker,
                                                 self.batch)
            if next_marker is None:
                return
            now = now_ms()
            deleted = handle(page, [m for m in page if m.expires_ms > now])
            marker = (self.source.after_delete(next_marker, deleted)
                      if deleted else next_marker)

    def count(self, queue, project):
        """The dry run: what a move would carry, changing nothing."""
        report = QueueReport(project, queue)

        def count_page(page, live):
            report.messages += len(live)
            report.expired += len(page) - len(live)
            self.progress.add(len(page), 'counted')

        self.walk(queue, project, count_page)
        report.subscriptions = sum(1 for sub in self._live_subscriptions(
            queue, project))
        return report

    def move(self, queue, project):
        report = QueueReport(project, queue)
        messages = self.target.message_controller
        policy = messages.target_policy(queue, project)

        def move_page(page, live):
            now = now_ms()
            for client, run in itertools.groupby(
                    live, key=lambda m: m.client_uuid):
                run = list(run)
                try:
                    messages.carry_in(queue, project, [
                        _carried(m, now, policy) for m in run], client)
                except errors.InvalidInput:
                    self._carry_one_by_one(queue, project, run, client,
                                           now, policy, report)
            report.messages += len(live)
            report.expired += len(page) - len(live)
            self.progress.add(len(page), 'moved')

        self.walk(queue, project, move_page)
        for sub in self._live_subscriptions(queue, project):
            self._carry_subscription(queue, project, sub)
            report.subscriptions += 1
        return report

    def verify(self, queue, project, report, delete=False):
        """Read every live source message back from the target; with
        ``delete``, delete the verified ones from the source, page by
        page. Differences go into ``report``."""

        def verify_page(page, live):
            good = self._verified(queue, project, live, report)
            report.verified += len(good)
            self.progress.add(len(page), 'verified')
            if delete and good:
                self.source.delete(queue, project, good)
                report.deleted += len(good)
                return len(good)
            return 0

        self.walk(queue, project, verify_page)
        subs = self.target.subscription_controller
        for sub in self._live_subscriptions(queue, project):
            if subs.get_with_subscriber(queue, sub['subscriber'],
                                        project) is None:
                report.differ('subscription {}: missing in the '
                              'target'.format(sub['subscriber']))
        return report

    def _verified(self, queue, project, live, report):
        """The ids of ``live`` whose copy in the target matches, or that
        the target carried in and its consumers removed since (a move
        run again after clients used it); what differs goes into the
        report."""
        messages = self.target.message_controller
        found = {m['id']: m for m in messages.bulk_get(
            queue, [m.id for m in live], project=project)}
        now = now_ms()
        missing = [m.id for m in live
                   if m.id not in found and m.expires_ms > now]
        consumed = messages.carried_in(queue, project, missing) \
            if missing else set()
        good = []
        for message in live:
            copy = found.get(message.id)
            if copy is None:
                if message.id in report.refused:
                    continue
                if message.id in consumed:
                    report.consumed += 1
                    good.append(message.id)
                elif message.expires_ms > now:
                    report.differ('message {}: missing in the '
                                  'target'.format(message.id))
                continue
            wrong = _difference(message, copy, now)
            if wrong:
                report.differ('message {}: {}'.format(message.id, wrong))
            else:
                good.append(message.id)
        return good

    def _carry_one_by_one(self, queue, project, run, client, now, policy,
                          report):
        """A batch the target refused (a body Zaqar took and this store
        cannot hold: NaN in JSON, bytes that are not text; a message
        over the target's size limits), one message at a time: those it
        refuses stay in the source, each a difference, and the move goes
        on (stopping would stop every run again at the same message)."""
        messages = self.target.message_controller
        for message in run:
            try:
                messages.carry_in(queue, project,
                                  [_carried(message, now, policy)], client)
            except errors.InvalidInput as exc:
                report.refused.add(message.id)
                report.differ('message {}: the target refused it, left in '
                              'the source: {}'.format(message.id, exc))

    def _live_subscriptions(self, queue, project):
        return (sub for sub in self.source.subscriptions(queue, project)
                if _remaining_ttl(sub) > 0)

    def _carry_subscription(self, queue, project, sub):
        """Create it with its remaining ttl unless the target has its
        subscriber already (a run before this one); carry confirmed."""
        subs = self.target.subscription_controller
        subs.create(queue, sub['subscriber'], _remaining_ttl(sub),
                    sub['options'], project=project)
        if sub.get('confirmed'):
            copy = subs.get_with_subscriber(queue, sub['subscriber'], project)
            if copy is not None and not copy.get('confirmed'):
                subs.confirm(queue, copy['id'], project=project,
                             confirmed=True)


def _remaining_ttl(sub):
    """Whole seconds: Zaqar's Swift driver gives a subscription's age as
    a float, and a store's expiry takes an integer."""
    return math.ceil(sub['ttl'] - sub['age'])


def _carried(message, now, policy):
    return rules.carried_message(
        message.id, message.body, message.ttl_s(), message.delay_s(),
        max(0, now - message.created_ms), policy, message.checksum)


def _difference(message, copy, now):
    """What of ``message`` its ``copy`` (as the target's API shows it)
    did not keep, or None. Age and remaining ttl are in whole seconds on
    two stores' clocks: within CLOCK_SLACK_MS."""
    if copy['body'] != _as_stored(message.body):
        return 'body differs: source {!r}, target {!r}'.format(
            message.body, copy['body'])
    if message.checksum and copy.get('checksum') != message.checksum:
        return 'checksum differs: source {!r}, target {!r}'.format(
            message.checksum, copy.get('checksum'))
    age_ms = now - message.created_ms
    if abs(copy['age'] * 1000 - age_ms) > CLOCK_SLACK_MS:
        return 'age differs: source {:.0f} s, target {} s'.format(
            age_ms / 1000, copy['age'])
    left_ms = message.expires_ms - now
    copy_left_ms = (copy['ttl'] - copy['age']) * 1000
    # A claim in the target grows a message's ttl as Zaqar's does.
    grown = copy.get('claim_count') and copy_left_ms > left_ms
    if abs(copy_left_ms - left_ms) > CLOCK_SLACK_MS and not grown:
        return 'remaining ttl differs: source {:.0f} s, target {} s'.format(
            left_ms / 1000, copy['ttl'] - copy['age'])
    return None


def _as_stored(body):
    """The body as the target hands it back (JSON; bytes as text)."""
    if isinstance(body, bytes):
        body = body.decode('ascii', 'replace')
    return json.loads(json.dumps(body, ensure_ascii=False))
