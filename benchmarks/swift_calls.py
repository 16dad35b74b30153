"""What the Swift servers spend on our driver's post and claim+delete.

    python -m benchmarks.swift_calls [--calls N] [--rounds R]

Runs the code of the current directory (``python -m`` imports it from
there): to compare two versions, run it in a worktree of each, taking
turns. A test Swift and redis-server of its own; per round, on a fresh
queue, N posts of 10 messages, then claims of 10 with the deletes of
what they took until the queue is empty, printing the Swift servers'
CPU (every server process, ``SwiftServer.cpu_seconds``) per call
(request_cost.per_call). benchmarks.request_cost prices each kind of
request and compares the drivers over a few calls; this one measures a
change of ours over more, where a short run is too noisy
(docs/performance.md).
"""

import argparse

from benchmarks import request_cost
from benchmarks import retention_swift
from benchmarks.retention import PROJECT
from localstack.redis_server import RedisServer
from localstack.swift_server import SwiftServer


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--calls', type=int, default=40)
    parser.add_argument('--rounds', type=int, default=3)
    args = parser.parse_args(argv)
    with RedisServer() as redis, SwiftServer() as swift:
        driver = retention_swift.make_driver(redis.url, swift)
        print('Swift CPU per call')
        for round_number in range(1, args.rounds + 1):
            posting, draining = request_cost.per_call(
                swift.cpu_seconds, driver, PROJECT, args.calls)
            for name, seconds in (('post of 10', posting),
                                  ('claim of 10 + its deletes', draining)):
                print('%-32s %11.0f ms' % ('%s (%d)' % (name, round_number),
                                           seconds * 1000))


if __name__ == '__main__':
    main()
