"""What the Swift servers spend on our driver's post and claim+delete.

    python -m benchmarks.swift_calls [--calls N] [--rounds R]

Runs the code of the current directory (``python -m`` imports it from
there): to compare two versions, run it in a worktree of each, taking
turns. A test Swift and redis-server of its own; 5 posts of 10 to warm
up, then, per round, N posts of 10 messages and N claims of 10 with the
deletes of what they took, printing the Swift servers' CPU (every server
process, ``SwiftServer.cpu_seconds``) and the wall time per call.
benchmarks.request_cost prices each kind of request and compares the
drivers; this one measures a change of ours over more calls, where the
per-call CPU of a short run is too noisy (docs/performance.md).
"""

import argparse
import time

from benchmarks import retention_swift
from benchmarks.retention import PROJECT
from localstack.redis_server import RedisServer
from localstack.swift_server import SwiftServer

BATCH = [{'ttl': 300, 'body': {'n': n}} for n in range(10)]
CLIENT = '5a1e0c3f-0000-4000-8000-000000000000'
CLAIM = {'ttl': 60, 'grace': 60}


def post(driver):
    driver.message_controller.post('q', BATCH, CLIENT, project=PROJECT)


def claim_and_delete(driver):
    claim_id, messages = driver.claim_controller.create(
        'q', CLAIM, project=PROJECT, limit=10)
    for message in messages:
        driver.message_controller.delete('q', message['id'],
                                         project=PROJECT, claim=claim_id)


def measure(swift, call, driver, calls):
    """(Swift CPU ms, wall ms) per call."""
    cpu, wall = swift.cpu_seconds(), time.perf_counter()
    for _ in range(calls):
        call(driver)
    return ((swift.cpu_seconds() - cpu) * 1000 / calls,
            (time.perf_counter() - wall) * 1000 / calls)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--calls', type=int, default=40)
    parser.add_argument('--rounds', type=int, default=3)
    args = parser.parse_args(argv)
    with RedisServer() as redis, SwiftServer() as swift:
        driver = retention_swift.make_driver(redis.url, swift)
        driver.queue_controller.create('q', project=PROJECT)
        for _ in range(5):
            post(driver)
        print('%-28s %14s %10s' % ('per call', 'Swift CPU', 'wall'))
        for round_number in range(1, args.rounds + 1):
            for name, call in (('post of 10', post),
                               ('claim of 10 + its deletes',
                                claim_and_delete)):
                cpu, wall = measure(swift, call, driver, args.calls)
                print('%-28s %11.0f ms %7.0f ms' % (
                    '%s (%d)' % (name, round_number), cpu, wall))


if __name__ == '__main__':
    main()
