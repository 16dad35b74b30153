"""Side-by-side benchmark: zaqar-delay drivers against Zaqar's built-in ones.

    python -m benchmarks.run [--quick] [--backend NAME] [--plot DIR]

Starts one redis-server (and, for Swift, a real single-node Swift) and
measures our driver and Zaqar's own side by side on each backend: post
throughput, claim+delete throughput, and claim latency with 0, 10,000 and
100,000 delayed messages queued ahead; then, for our driver alone (Zaqar
has no groups), claim latency on a grouped queue with 10,000 group heads in
flight and 100,000 messages blocked behind them. Swift runs smaller sizes.
Prints figures and ratios (ours / Zaqar's for throughput; latency against
our own empty queue), and on Redis the round trips each call sends to the
data and control stores (benchmarks/round_trips.py; on MongoDB the
requests sent, counted with a CommandListener on a server and per
collection call on mongomock), and on Swift the CPU its server processes
spend per post and per claim with its deletes (``--swift-workers N``
gives each server N worker processes, as a production Swift forks one per
core). ``--plot DIR`` also draws them (benchmarks/plot.py,
needs matplotlib) as PNG files in DIR.
"""

import argparse
import os
import statistics
import sys
import uuid


from pymongo import monitoring

from benchmarks import round_trips
from benchmarks import workloads
from localstack import backends
from localstack.redis_server import RedisServer


def redis_pair(redis_url):
    from zaqar.storage.redis import driver as zaqar_redis
    from zaqar_delay.drivers.redis import driver as ours
    conf = backends.make_conf()
    conf.set_override('uri', redis_url.replace('redis://', 'delay.redis://'),
                      group='drivers:message_store:delay.redis')
    # Zaqar's default 0.1 s socket timeout cannot wait out its own claim
    # script scanning 100,000 delayed messages.
    conf.set_override('uri', redis_url + '?socket_timeout=120',
                      group='drivers:message_store:redis')
    control = backends.control_driver(conf, redis_url)
    return (ours.DataDriver(conf, None, control),
            zaqar_redis.DataDriver(conf, None, control))


def mongodb_pair(redis_url, uri):
    """Our MongoDB driver and Zaqar's, on ``uri`` or else on mongomock
    (where the figures only show that both run: mongomock is an in-process
    fake with its own costs)."""
    from unittest import mock
    from zaqar.storage.mongodb import driver as zaqar_mongodb
    from zaqar_delay.drivers.mongodb import driver as ours
    from localstack.factories import mongodb as mongodb_factory
    conf = backends.make_conf()
    conf.set_override('unreliable', True)
    database = 'zd_bench_' + uuid.uuid4().hex[:8]
    conf.set_override('database', database,
                      group='drivers:message_store:delay.mongodb')
    conf.set_override('database', database + '_zaqar',
                      group='drivers:message_store:mongodb')
    control = backends.control_driver(conf, redis_url)
    if uri:
        conf.set_override('uri', uri,
                          group='drivers:message_store:delay.mongodb')
        conf.set_override('uri', uri, group='drivers:message_store:mongodb')
        return (ours.DataDriver(conf, None, control),
                zaqar_mongodb.DataDriver(conf, None, control))
    factory = mongodb_factory.mongomock_client_factory()
    client = mongodb_factory.StandaloneView(factory(None))
    with mock.patch.object(zaqar_mongodb, '_connection',
                           lambda conf: client):
        theirs = zaqar_mongodb.DataDriver(conf, None, control)
        theirs.connection  # resolved now, while the patch holds
    return ours.DataDriver(conf, None, control, client_factory=factory), \
        theirs


def swift_pair(redis_url, server, **options):
    """Our Swift driver and Zaqar's, on one real single-node Swift;
    ``options`` override those of our driver."""
    from zaqar.storage.swift import driver as zaqar_swift
    from zaqar_delay.drivers.swift import driver as ours
    from localstack.factories import swift as swift_factory
    conf = backends.make_conf()
    conf.set_override('uri', swift_factory.swift_uri(server),
                      group=swift_factory.GROUP)
    for name, value in options.items():
        conf.set_override(name, value, group=swift_factory.GROUP)
    control = backends.control_driver(conf, redis_url)
    theirs = zaqar_swift.DataDriver(conf, None, control)
    # lazy_property's slot: Zaqar's driver connects through tempauth.
    theirs._lazy_connection = swift_factory.TempauthClient(server)
    return ours.DataDriver(conf, None, control), theirs


def fmt_rate(value):
    return '{:>10,.0f} msg/s'.format(value)


def fmt_ms(pair):
    return '{:>7.2f} / {:>7.2f} ms'.format(pair[0] * 1000, pair[1] * 1000)


def theirs_latency(driver, project, ahead, samples):
    """Claim latency of Zaqar's driver, or how it failed: its Swift driver
    filters listings recursively and overflows Python's stack once a few
    thousand delayed messages are queued ahead."""
    try:
        queue = workloads.delayed_queue(driver, project, ahead, samples)
        return workloads.claim_latencies(driver, project, [queue],
                                         samples)[0]
    except Exception as exc:
        return 'fails: ' + type(exc).__name__


def alternate(run, ours, theirs, total, rounds=5):
    """Rates of ``run`` on both drivers, measured in alternating rounds so
    that noise on a shared machine falls on both alike."""
    rates = ([], [])
    for _ in range(rounds):
        for driver, out in zip((ours, theirs), rates):
            out.append(run(driver, total // rounds))
    return (statistics.median(rates[0]), statistics.median(rates[1]))


def bench(ours, theirs, args):
    """Measure and print; returns the figures for benchmarks.plot:
    {'throughput': {name: (ours, theirs)}, 'latency': [(delayed ahead,
    our median, Zaqar's median or None if it failed)]} (seconds)."""
    project = 'bench-' + uuid.uuid4().hex[:6]
    rows, figures = [], {'throughput': {}, 'latency': []}
    for name, run in (
            ('post (10/post)', lambda d, n: workloads.post_throughput(
                d, project, n)),
            ('claim+delete (10/claim)',
             lambda d, n: workloads.claim_delete_throughput(
                 d, project, n))):
        a, b = alternate(run, ours, theirs, args.messages)
        figures['throughput'][name] = (a, b)
        rows.append((name, fmt_rate(a), fmt_rate(b), '{:.2f}x'.format(a / b)))
    print('\n{:<28} {:>18} {:>18} {:>8}'.format(
        'throughput', 'zaqar-delay', 'zaqar built-in', 'ratio'))
    for row in rows:
        print('{:<28} {:>18} {:>18} {:>8}'.format(*row))

    if args.round_trips:
        print_round_trips(ours, theirs, project, args.round_trips)
    if getattr(args, 'server_cpu', None):
        print_server_cpu(ours, theirs, project, args.server_cpu)

    print('\n{:<28} {:>22} {:>22} {:>9}'.format(
        'claim latency median/p95', 'zaqar-delay', 'zaqar built-in',
        'vs empty'))
    mine = workloads.claim_latencies(ours, project, [
        workloads.delayed_queue(ours, project, ahead, args.samples)
        for ahead in args.delayed], args.samples)
    theirs_samples = max(5, args.samples // 10)
    other = [theirs_latency(theirs, project, ahead, theirs_samples)
             for ahead in args.delayed]
    for ahead, m, o in zip(args.delayed, mine, other):
        figures['latency'].append(
            (ahead, m[0], None if isinstance(o, str) else o[0]))
        print('{:<28} {:>22} {:>22} {:>8.2f}x'.format(
            '{:,} delayed ahead'.format(ahead), fmt_ms(m),
            o if isinstance(o, str) else fmt_ms(o), m[0] / mine[0][0]))

    print('\n{:<40} {:>22} {:>9}'.format(
        'group claim latency median/p95', 'zaqar-delay', 'vs none'))
    mine = workloads.claim_latencies(ours, project, [
        workloads.grouped_queue(ours, project, groups, blocked, args.samples)
        for groups, blocked in args.groups], args.samples)
    for (groups, blocked), m in zip(args.groups, mine):
        print('{:<40} {:>22} {:>8.2f}x'.format(
            '{:,} heads in flight, {:,} blocked'.format(
                groups, groups * blocked), fmt_ms(m), m[0] / mine[0][0]))
    return figures


def print_server_cpu(ours, theirs, project, cpu_seconds, calls=10):
    """CPU the store's server processes spend per call, as
    ``cpu_seconds()`` reads it (the test Swift: every server and worker):
    ``calls`` posts of 10, then claims of 10 and their deletes (and of
    that, the deletes alone)."""
    print('\n{:<28} {:>18} {:>18} {:>8}'.format(
        'store CPU per call', 'zaqar-delay', 'zaqar built-in', 'ratio'))
    spent = {}
    for who, driver in (('ours', ours), ('theirs', theirs)):
        queue = workloads.fresh_queue(driver, project)
        batch = [{'ttl': 3600, 'body': {'n': n, 'pad': 'x' * 64}}
                 for n in range(10)]
        before = cpu_seconds()
        for _ in range(calls):
            driver.message_controller.post(queue, batch, workloads.CLIENT,
                                           project=project)
        posted = cpu_seconds()
        phases = workloads.CpuByPhase(cpu_seconds)
        taken = workloads.drain(driver, project, queue, 10 * calls,
                                phase_done=phases)
        spent[who] = ((posted - before) / calls,
                      sum(phases.spent.values()) / (taken / 10),
                      phases.spent['delete'] / (taken / 10))
    for i, name in enumerate(('post of 10', 'claim of 10 + its deletes',
                              '  of which its 10 deletes')):
        print('{:<28} {:>15.0f} ms {:>15.0f} ms {:>7.2f}x'.format(
            name, spent['ours'][i] * 1000, spent['theirs'][i] * 1000,
            spent['ours'][i] / spent['theirs'][i]))


def print_round_trips(ours, theirs, project, measured):
    """Round trips per call, data store + Zaqar's control store (Redis),
    ``measured`` as benchmarks.round_trips counts them."""
    figures = [round_trips.per_call(driver, project,
                                    workloads.fresh_queue(driver, project),
                                    measured)
               for driver in (ours, theirs)]
    print('\n{:<28} {:>18} {:>18}'.format(
        'round trips per call', 'zaqar-delay', 'zaqar built-in'))
    print('{:<28} {:>18} {:>18}'.format('', '(data + control)',
                                        '(data + control)'))
    for name in figures[0]:
        print('{:<28} {:>18} {:>18}'.format(name, *(
            '{} + {} = {}'.format(data, control, data + control)
            for data, control in (f[name] for f in figures))))


def quick(args):
    args.messages, args.samples = 500, 50
    args.delayed, args.groups = [0, 1000], [(0, 0), (100, 10)]
    return args


def full(args):
    args.messages, args.samples = 5000, 300
    args.delayed, args.groups = [0, 10000, 100000], [(0, 0), (10000, 10)]
    return args


def swift_sizes(args):
    args = argparse.Namespace(**vars(args))
    args.messages, args.samples = (100, 10) if args.quick else (500, 30)
    args.delayed = [0, 200] if args.quick else [0, 1000, 5000]
    args.groups = [(0, 0), (20, 5)] if args.quick else [(0, 0), (200, 10)]
    return args


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--quick', action='store_true',
                        help='small sizes, to check that everything runs')
    parser.add_argument('--backend', action='append',
                        choices=('redis', 'mongodb', 'swift'),
                        help='backends to measure (default: all)')
    parser.add_argument('--mongodb-uri',
                        default=os.environ.get('ZAQAR_DELAY_TEST_MONGODB_URI'),
                        help='a real MongoDB server; default: mongomock')
    parser.add_argument('--swift-workers', type=int, default=0,
                        metavar='N',
                        help="Swift's `workers` for each test Swift server "
                             '(default 0: one process serving every '
                             'request; a production Swift forks one per '
                             'core, `workers = auto`)')
    parser.add_argument('--plot', metavar='DIR',
                        help='also draw the figures as PNG files in DIR '
                             '(needs matplotlib)')
    args = parser.parse_args(argv)
    chosen = args.backend or ['redis', 'mongodb', 'swift']
    args = quick(args) if args.quick else full(args)
    figures = {}
    with RedisServer() as server:
        if 'redis' in chosen:
            print('\n#### Redis:', server.binary, 'on', server.url)
            args.round_trips = round_trips.redis_round_trips
            figures['Redis'] = bench(*redis_pair(server.url), args)
        if 'mongodb' in chosen:
            if args.mongodb_uri:
                print('\n#### MongoDB:', args.mongodb_uri)
            else:
                print('\n#### MongoDB on mongomock (no server given): '
                      'checks that both drivers run; the figures measure '
                      'mongomock, not MongoDB')
                args = quick(args)
            args.round_trips = round_trips.mongodb_round_trips
            if args.mongodb_uri:
                monitoring.register(round_trips.MongoCommands())
            figures['MongoDB' if args.mongodb_uri else 'mongomock'] = bench(
                *mongodb_pair(server.url, args.mongodb_uri), args)
        if 'swift' in chosen:
            args.round_trips = None
            from localstack.swift_server import SwiftServer
            with SwiftServer(workers=args.swift_workers) as swift:
                args.server_cpu = swift.cpu_seconds
                print('\n#### Swift: single node (1 replica, tempauth,',
                      args.swift_workers or 'one process, no',
                      'workers per server) on', swift.url,
                      '- sizes scaled down: a Swift request costs '
                      'milliseconds')
                figures['Swift'] = bench(*swift_pair(server.url, swift),
                                         swift_sizes(args))
    if args.plot:
        from benchmarks import plot
        for path in plot.draw(figures, args.plot):
            print('drew', path)


if __name__ == '__main__':
    sys.exit(main())
