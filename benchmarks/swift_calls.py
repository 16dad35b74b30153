"""What the Swift servers spend on our driver's post and claim+delete.

    python -m benchmarks.swift_calls [--calls N] [--rounds R] [--phases]

Runs the code of the current directory (``python -m`` imports it from
there): to compare two versions, run it in a worktree of each, taking
turns. A test Swift and redis-server of its own; per round, on a fresh
queue, N posts of 10 messages, then claims of 10 with the deletes of
what they took until the queue is empty, printing per call
(request_cost.per_call) the Swift servers' CPU (every server process,
``SwiftServer.cpu_seconds``) and our driver's own: this process's CPU,
which runs nothing else meanwhile. benchmarks.request_cost prices each
kind of request and compares the drivers over a few calls; this one
measures a change of ours over more, where a short run is too noisy
(docs/performance.md).

``--phases`` prints instead where one call's time goes: for the post,
the claim and the delete whose wall time is the median of N, each kind
of Swift request it sent (method and name prefix), how many, and from
when to when they ran, counted from the call's start; then the median
wall time of the same calls through Zaqar's own Swift driver.
"""

import argparse
import collections
import statistics
import time

from benchmarks import request_cost
from benchmarks import retention_swift
from benchmarks import run
from benchmarks import workloads
from benchmarks.retention import PROJECT
from localstack.redis_server import RedisServer
from localstack.swift_server import SwiftServer


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--calls', type=int, default=40)
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--phases', action='store_true',
                        help='print the requests of the median post, '
                             'claim and delete of --calls, in time')
    args = parser.parse_args(argv)
    with RedisServer() as redis, SwiftServer() as swift:
        driver = retention_swift.make_driver(redis.url, swift)
        if args.phases:
            print_phases(driver, args.calls)
            print_zaqars_walls(run.swift_pair(redis.url, swift)[1],
                               args.calls)
            return
        print('CPU per call                      Swift servers  '
              'our driver')
        for round_number in range(1, args.rounds + 1):
            posting, draining = request_cost.per_call(
                lambda: Cpu(swift.cpu_seconds(), time.process_time()),
                driver, PROJECT, args.calls)
            for name, spent in (('post of 10', posting),
                                ('claim of 10 + its deletes', draining)):
                print('%-32s %11.0f ms %8.1f ms' % (
                    '%s (%d)' % (name, round_number), spent.swift * 1000,
                    spent.driver * 1000))


class Cpu(collections.namedtuple('Cpu', 'swift driver')):
    """CPU seconds of the Swift servers and of this process, which
    request_cost.per_call subtracts and divides as one figure."""

    def __sub__(self, other):
        return Cpu(self.swift - other.swift, self.driver - other.driver)

    def __truediv__(self, count):
        return Cpu(self.swift / count, self.driver / count)


CALLS = ('post of 10', 'claim of 10', 'delete')


class Timeline:
    """Records each Swift request ``driver`` sends: (kind, start, end)."""

    def __init__(self, driver):
        self.spans = []
        self._real = driver.store.call
        driver.store.call = self._call

    def _call(self, method, *args, **kwargs):
        began = time.monotonic()
        try:
            return self._real(method, *args, **kwargs)
        finally:
            # Object calls name the object after the container; listings
            # pass a prefix.
            name = args[1] if len(args) > 1 and isinstance(args[1], str) \
                else kwargs.get('prefix') or ''
            self.spans.append(('{} {}'.format(method, name[:2]).strip(),
                               began, time.monotonic()))

    def of(self, call):
        """(wall seconds, spans relative to the start) of ``call()``."""
        self.spans = []
        start = time.monotonic()
        call()
        return time.monotonic() - start, [
            (kind, began - start, end - start)
            for kind, began, end in self.spans]


def timed_calls(driver, calls, timed):
    """``timed(call)`` of ``calls`` posts of 10, then of claims of 10 and
    each of their deletes, on a fresh queue: (posts, claims, deletes)."""
    queue = workloads.fresh_queue(driver, PROJECT)
    messages = driver.message_controller
    # A queue's first post makes its container: not measured.
    messages.post(queue, [{'ttl': 3600, 'body': 'first'}], workloads.CLIENT,
                  project=PROJECT)
    posts, claims, deletes = [], [], []
    for number in range(calls):
        posts.append(timed(lambda: messages.post(
            queue, [{'ttl': 3600, 'body': number}] * 10, workloads.CLIENT,
            project=PROJECT)))
    for _ in range(calls):
        taken = []
        claims.append(timed(lambda: taken.append(list(
            driver.claim_controller.create(queue, workloads.CLAIM,
                                           project=PROJECT, limit=10)))))
        claim_id, claimed = taken[0]
        for message in claimed:
            deletes.append(timed(lambda: messages.delete(
                queue, message['id'], project=PROJECT, claim=claim_id)))
    return posts, claims, deletes


def print_zaqars_walls(theirs, calls):
    def wall(call):
        start = time.monotonic()
        call()
        return time.monotonic() - start
    walls = timed_calls(theirs, calls, wall)
    print('\nZaqar\'s Swift driver, the same calls: ' + ', '.join(
        '%s %.1f ms' % (name, statistics.median(measured) * 1000)
        for name, measured in zip(CALLS, walls)) + ' (medians)')


def print_phases(driver, calls):
    for name, measured in zip(CALLS, timed_calls(
            driver, calls, Timeline(driver).of)):
        median = sorted(measured)[len(measured) // 2]
        print('\n%s: the median of %d, %.1f ms (all: median %.1f ms)' % (
            name, len(measured), median[0] * 1000,
            statistics.median(wall for wall, _ in measured) * 1000))
        for kind, (count, began, ended) in phases(median[1]).items():
            print('  %-24s %3d  %7.1f - %7.1f ms' % (
                kind, count, began * 1000, ended * 1000))


def phases(spans):
    """{kind: (count, first start, last end)}, in the order first sent."""
    out = {}
    for kind, began, ended in spans:
        count, first, last = out.get(kind, (0, began, ended))
        out[kind] = (count + 1, min(first, began), max(last, ended))
    return out


if __name__ == '__main__':
    main()
