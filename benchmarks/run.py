"""Side-by-side benchmark: zaqar-delay drivers against Zaqar's built-in ones.

    python -m benchmarks.run [--quick]

Starts one redis-server and measures, on it, our Redis driver and Zaqar's
own: post throughput, claim+delete throughput, and claim latency with 0,
10,000 and 100,000 delayed messages queued ahead. Prints figures and ratios
(ours / Zaqar's for throughput; latency against our empty-queue latency).
"""

import argparse
import sys
import uuid

from benchmarks import workloads
from tests import backends
from tests.servers.redis_server import RedisServer


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


def fmt_rate(value):
    return '{:>10,.0f} msg/s'.format(value)


def fmt_ms(pair):
    return '{:>7.2f} / {:>7.2f} ms'.format(pair[0] * 1000, pair[1] * 1000)


def bench(ours, theirs, args):
    project = 'bench-' + uuid.uuid4().hex[:6]
    rows = []
    for name, run in (
            ('post (10/post)', lambda d: workloads.post_throughput(
                d, project, args.messages)),
            ('claim+delete (10/claim)',
             lambda d: workloads.claim_delete_throughput(
                 d, project, args.messages))):
        a, b = run(ours), run(theirs)
        rows.append((name, fmt_rate(a), fmt_rate(b), '{:.2f}x'.format(a / b)))
    print('\n{:<28} {:>18} {:>18} {:>8}'.format(
        'throughput', 'zaqar-delay', 'zaqar built-in', 'ratio'))
    for row in rows:
        print('{:<28} {:>18} {:>18} {:>8}'.format(*row))

    print('\n{:<28} {:>22} {:>22} {:>9}'.format(
        'claim latency median/p95', 'zaqar-delay', 'zaqar built-in',
        'vs empty'))
    baseline = None
    for ahead in args.delayed:
        mine = workloads.claim_latency(ours, project, ahead, args.samples)
        other = workloads.claim_latency(theirs, project, ahead,
                                        max(5, args.samples // 10))
        baseline = baseline or mine[0]
        print('{:<28} {:>22} {:>22} {:>8.2f}x'.format(
            '{:,} delayed ahead'.format(ahead), fmt_ms(mine), fmt_ms(other),
            mine[0] / baseline))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--quick', action='store_true',
                        help='small sizes, to check that everything runs')
    args = parser.parse_args(argv)
    args.messages = 500 if args.quick else 5000
    args.samples = 50 if args.quick else 300
    args.delayed = [0, 1000] if args.quick else [0, 10000, 100000]
    with RedisServer() as server:
        print('Redis:', server.binary, 'on', server.url)
        bench(*redis_pair(server.url), args)


if __name__ == '__main__':
    sys.exit(main())
