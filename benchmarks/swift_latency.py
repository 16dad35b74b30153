"""Ours against Zaqar's Swift driver when each Swift request takes longer.

    python -m benchmarks.swift_latency [--latency MS ...] [--messages N]
                                       [--rounds R]

The test Swift of ``benchmarks.run`` answers from memory, on loopback,
with every server on this machine's two cores: a request costs its
servers' CPU and next to no waiting, so the driver that sends fewer
requests wins, whether it sends them one after the other (Zaqar's) or
several at once (ours). A production Swift spreads that CPU over many
machines and adds what this one lacks: the network between the API node
and the proxy, and the proxy waiting for a quorum of object servers to
write to disk. This benchmark adds that wait as ``--latency`` ms of
sleep before each request either driver sends (a sleep, so Swift's CPU
per request stays what it is), and measures post and claim+delete
throughput of both drivers side by side at each latency, alternating as
``benchmarks.run`` does. It is a model of one cost, not a measurement of
a real cluster: the latency at which the ratios pass 1x says how slow a
request must be for our concurrent requests to make up for sending more
of them. The last two columns are the Swift requests each driver sent
per message, ours then Zaqar's (claim+delete's include posting the
messages it then claims, and both making each round's fresh queue; the
first row also our driver's authentication).
"""

import argparse
import contextlib
import threading
import time
import uuid
from unittest import mock

from swiftclient import client as swift_client

from benchmarks import run
from benchmarks import workloads
from localstack.redis_server import RedisServer
from localstack.swift_server import SwiftServer

WORKLOADS = (
    ('post (10/post)', workloads.post_throughput),
    ('claim+delete (10/claim)', workloads.claim_delete_throughput),
)


class Latency:
    """Sleeps ``seconds`` before each request swiftclient sends, for
    every connection of the process, and counts the requests it held."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.held = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def applied(self):
        send = swift_client.HTTPConnection._request

        def delayed(connection, *args, **kwargs):
            with self._lock:
                self.held += 1
            time.sleep(self.seconds)
            return send(connection, *args, **kwargs)

        with mock.patch.object(swift_client.HTTPConnection, '_request',
                               delayed):
            yield self


def measure(ours, theirs, latency_ms, messages, rounds):
    """{workload name: ((ours, Zaqar's) messages per second, (ours,
    Zaqar's) Swift requests per message)} with ``latency_ms`` added to
    each request."""
    project = 'latency-' + uuid.uuid4().hex[:6]
    figures = {}
    with Latency(latency_ms / 1000.0).applied() as latency:
        for name, workload in WORKLOADS:
            sent = {id(ours): 0, id(theirs): 0}

            def counted(driver, total, workload=workload):
                before = latency.held
                rate = workload(driver, project, total)
                sent[id(driver)] += latency.held - before
                return rate

            rates = run.alternate(counted, ours, theirs, messages, rounds)
            # What the workloads handle: whole batches of 10 per round.
            handled = rounds * (messages // rounds // 10 * 10)
            figures[name] = rates, (sent[id(ours)] / handled,
                                    sent[id(theirs)] / handled)
    return figures


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--latency', type=float, action='append',
                        metavar='MS',
                        help='ms added to each Swift request; repeat for '
                             'more (default: 0, 5, 10, 20)')
    parser.add_argument('--messages', type=int, default=200,
                        help='messages per workload, driver and latency')
    parser.add_argument('--rounds', type=int, default=4,
                        help='alternating rounds the messages are split in')
    parser.add_argument('--parallel', type=int, metavar='N',
                        help="our driver's max_parallel_requests (default: "
                             "the option's default)")
    args = parser.parse_args(argv)
    if args.messages < 10 * args.rounds:
        parser.error('--messages must give each round a batch of 10')
    if args.parallel is not None and args.parallel < 1:
        parser.error('--parallel must be at least 1')
    latencies = args.latency or [0, 5, 10, 20]
    with RedisServer() as redis, SwiftServer() as swift:
        options = ({} if args.parallel is None
                   else {'max_parallel_requests': args.parallel})
        ours, theirs = run.swift_pair(redis.url, swift, **options)
        print('{:<9} {:<24} {:>11} {:>14} {:>6} {:>14}'.format(
            'added ms', 'throughput', 'zaqar-delay', 'zaqar built-in',
            'ratio', 'requests/msg'))
        for latency_ms in latencies:
            figures = measure(ours, theirs, latency_ms, args.messages,
                              args.rounds)
            for name, ((mine, zaqars), sent) in figures.items():
                print('{:<9g} {:<24} {:>5.0f} msg/s {:>8.0f} msg/s {:>5.2f}x '
                      '{:>6.1f} {:>6.1f}'.format(
                          latency_ms, name, mine, zaqars, mine / zaqars,
                          *sent))


if __name__ == '__main__':
    main()
