"""Sticky consumers on Redis: do groups pinned to other clients cost a
claim anything? (issue 23)

    python -m benchmarks.sticky [--groups 10000] [--clients 100]
        [--claims 300]

Starts one redis-server and makes two sticky queues
(``_message_group_sticky``). On one, ``--groups`` groups are pinned to
``--clients`` other clients, all still active (the driver's test clock does
not move, so none goes idle), each group with a claimable head waiting for
its client. Then the same messages (``--claims`` x 10, one group each) are
posted to both, and a client of its own claims them, 10 at a time, deleting
each batch. Prints claim latency median / p99 on each queue and their
ratio (target: <= 1.2), the median and slowest claim script call Redis
recorded (SLOWLOG, wall time; target <= 10 ms) and the Redis CPU time per
claim (INFO cpu, which the machine's load does not inflate). The two
queues are measured in alternating blocks of claims.

    python -m benchmarks.sticky --backend swift [--groups 300]
        [--clients 10] [--claims 30]

The same on a real single-node Swift (sizes scaled down: a Swift request
costs milliseconds), printing the Swift requests each claim sent instead
of Redis' figures: a claim lists ``a/`` and its own client's pinned heads
only, so the count is the same on both queues.
"""

import argparse
import statistics
import time
import uuid

import redis as redis_py

from benchmarks.bounded import PROJECT, make_driver, queue, redis_cpu_ms
from benchmarks.bounded import slowest
from benchmarks import retention_swift
from benchmarks.report import percentile
from localstack import backends
from localstack.redis_server import RedisServer
from zaqar_delay import sticky

STICKY = {'_message_group_key': 'g', '_message_group_sticky': 3600}
CLAIM = {'ttl': 300, 'grace': 60}
CLIENT = uuid.uuid4()
PIN_BATCH = 20
# Claims per queue before switching to the other.
BLOCK = 50
REDIS_SIZES = {'groups': 10000, 'clients': 100, 'claims': 300}
# A Swift request costs milliseconds: pinning 10,000 groups would take
# most of an hour on the test Swift.
SWIFT_SIZES = {'groups': 300, 'clients': 10, 'claims': 30}
SWIFT_BLOCK = 10


def post_groups(driver, name, groups, per_group, prefix):
    messages = [{'ttl': 3600, 'body': {'g': '%s%d' % (prefix, n), 'k': k}}
                for k in range(per_group) for n in range(groups)]
    for start in range(0, len(messages), 100):
        driver.message_controller.post(name, messages[start:start + 100],
                                       CLIENT, project=PROJECT)


def pin_to_others(driver, name, groups, clients):
    """Each group's first message claimed and deleted by one of
    ``clients`` other clients: its second waits, pinned to that client."""
    per_client = -(-groups // clients)
    for c in range(clients):
        with sticky.acting_as('other-%d' % c):
            for _ in range(-(-per_client // PIN_BATCH)):
                claim_id, got = driver.claim_controller.create(
                    name, CLAIM, project=PROJECT, limit=PIN_BATCH)
                ids = [m['id'] for m in got]
                if ids:
                    driver.message_controller.bulk_delete(
                        name, ids, project=PROJECT, claim_ids=[claim_id])


def claims(meter, driver, name, count):
    """(latencies ms, ``meter()``'s growth per claim: Redis CPU ms, or
    Swift requests) of ``count`` claims of 10 by this benchmark's own
    client, each batch then deleted."""
    latencies, cost = [], 0.0
    with sticky.acting_as('me'):
        for _ in range(count):
            before = meter()
            started = time.perf_counter()
            claim_id, got = driver.claim_controller.create(
                name, CLAIM, project=PROJECT, limit=10)
            latencies.append((time.perf_counter() - started) * 1000)
            cost += meter() - before
            ids = [m['id'] for m in got]
            assert len(ids) == 10, 'a claim came back short'
            driver.message_controller.bulk_delete(
                name, ids, project=PROJECT, claim_ids=[claim_id])
    return latencies, cost / count


def prepare(driver, args):
    """The two sticky queues, ``args.groups`` groups pinned to other
    clients on the first, ``args.claims`` x 10 of our own on both;
    {queue: label}."""
    pinned, empty = queue(driver, STICKY), queue(driver, STICKY)
    post_groups(driver, pinned, args.groups, 2, 'other')
    pin_to_others(driver, pinned, args.groups, args.clients)
    counts = driver.message_controller.stats(pinned, PROJECT)['messages']
    print('pinned queue: %d groups pinned to %d other live clients, '
          '%d messages waiting for them' % (
              counts.get('groups_pinned', 0), args.clients, counts['total']))
    labels = {empty: 'none pinned', pinned: '%d pinned' % args.groups}
    for name in labels:
        post_groups(driver, name, args.claims * 10, 1, 'mine')
    return labels


def print_ratio(labels, results):
    base, loaded = [results[name][0] for name in labels]
    print('ratio (pinned / none): median %.2f, p99 %.2f (target <= 1.2)'
          % (statistics.median(loaded) / statistics.median(base),
             percentile(loaded, 99) / percentile(base, 99)))


def run_swift(args):
    from localstack.factories import swift as swift_factory
    from localstack.swift_server import SwiftServer
    from zaqar_delay.drivers.swift import driver as swift_driver
    with RedisServer() as control, SwiftServer() as swift:
        conf = backends.make_conf()
        conf.set_override('uri', swift_factory.swift_uri(swift),
                          group=swift_factory.GROUP)
        driver = swift_driver.DataDriver(
            conf, None, backends.control_driver(conf, control.url))
        now = int(time.time() * 1000)
        driver.use_clock(lambda: now)
        sent = retention_swift.count_requests(driver)
        labels = prepare(driver, args)
        results = {name: ([], []) for name in labels}
        for start in range(0, args.claims, SWIFT_BLOCK):
            for name in labels:
                latencies, requests = claims(
                    lambda: len(sent), driver, name,
                    min(SWIFT_BLOCK, args.claims - start))
                results[name][0].extend(latencies)
                results[name][1].append(requests)
        for name, (latencies, requests) in results.items():
            print('%-14s claim median %.2f ms, p99 %.2f ms; %.1f Swift '
                  'requests per claim' % (
                      labels[name], statistics.median(latencies),
                      percentile(latencies, 99), statistics.mean(requests)))
        print_ratio(labels, results)
        driver.close()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--backend', choices=('redis', 'swift'),
                        default='redis')
    parser.add_argument('--groups', type=int)
    parser.add_argument('--clients', type=int)
    parser.add_argument('--claims', type=int)
    args = parser.parse_args(argv)
    defaults = SWIFT_SIZES if args.backend == 'swift' else REDIS_SIZES
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.backend == 'swift':
        run_swift(args)
        return
    server = RedisServer().start()
    try:
        raw = redis_py.Redis.from_url(server.url)
        now = int(time.time() * 1000)
        driver = make_driver(server.url, now)
        labels = prepare(driver, args)
        raw.config_set('slowlog-log-slower-than', 0)
        raw.config_set('slowlog-max-len', 1000000)
        # Alternating blocks, so that noise on a shared machine falls on
        # both queues alike.
        results = {name: ([], [], []) for name in labels}
        for start in range(0, args.claims, BLOCK):
            for name in labels:
                raw.slowlog_reset()
                latencies, cpu = claims(lambda: redis_cpu_ms(raw), driver,
                                        name, min(BLOCK, args.claims - start))
                scripts = slowest(raw)
                results[name][0].extend(latencies)
                results[name][1].append(cpu)
                results[name][2].extend(scripts['claim'])
        for name, (latencies, cpu, claim_scripts) in results.items():
            print('%-14s claim median %.2f ms, p99 %.2f ms; Redis CPU '
                  '%.3f ms/claim; claim script median %.2f ms, slowest '
                  '%.2f ms' % (
                      labels[name], statistics.median(latencies),
                      percentile(latencies, 99), statistics.mean(cpu),
                      statistics.median(claim_scripts), max(claim_scripts)))
        print_ratio(labels, results)
    finally:
        server.stop()


if __name__ == '__main__':
    main()
