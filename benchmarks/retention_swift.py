"""What retention costs on Swift (issue 10), against the same work without.

    python -m benchmarks.retention_swift [--posted 3000] [--length 1000]
        [--queues 10] [--queue-size 1000] [--claims 40] [--quick]

Starts one redis-server (Zaqar's queue catalogue) and one real single-node
Swift, and prints figures and ratios side by side. Sizes are scaled down
from the issue's (100,000 posted over length 10,000; 100 queues of 10,000):
a Swift request costs milliseconds, and posting 100,000 messages would
take hours on a test machine.

* ``overflow``: ``--posted`` messages posted (10 per call) to a queue with
  retention ``length`` ``--length``, then claims of 10 (each deleted) with
  10 more posted before each, so the queue stays in steady overflow; the
  same on a queue without retention, the two taking turns call by call.
  Post throughput and claim latency (median, p90); target ratio <= 1.2.
* ``cleanup pass``: gc's per-queue step (settle, expiry, repair, then the
  retention cleanup) over ``--queues`` queues of ``--queue-size`` messages
  each with nothing to remove (time 1 hour, length above the size),
  against the same pass over as many empty queues; and the retention
  cleanup (``clean_queue``) alone; medians of three passes. Target ratio
  <= 2. The first pass over a queue is deep (it lists the whole queue,
  then writes gc's summary, docs/swift.md "gc: deep and light passes"),
  the next two are light, as every pass is until something falls due.
* ``removal``: the cleanup removing N messages past retention ``time``,
  for two N: time per message (O(N) when the two are about equal).
"""

import argparse
import functools
import statistics
import time

from benchmarks.report import percentile
from benchmarks import retention
from benchmarks.retention import PROJECT, post_seconds, queue
from localstack import backends
from localstack.factories import swift as swift_factory
from localstack.redis_server import RedisServer
from localstack.swift_server import SwiftServer
from zaqar_delay.drivers.swift import names

CLAIM = {'ttl': 600, 'grace': 60}


def make_driver(redis_url, swift, **options):
    """Our Swift driver on ``swift``, with ``options`` of its section."""
    from zaqar_delay.drivers.swift import driver
    conf = backends.make_conf()
    for name, value in dict(options, uri=swift_factory.swift_uri(
            swift)).items():
        conf.set_override(name, value, group=swift_factory.GROUP)
    return driver.DataDriver(conf, None,
                             backends.control_driver(conf, redis_url))


def count_requests(driver):
    """From now on, the name of each Swift call ``driver`` makes is
    appended to the list returned."""
    sent = []
    real_call = driver.store.call

    def counted(method, *args, **kwargs):
        sent.append(method)
        return real_call(method, *args, **kwargs)

    driver.store.call = counted
    return sent


def post_many(driver, name, count):
    for start in range(0, count, 10):
        post_seconds(driver, name, start)


def claim_ms(driver, name):
    started = time.perf_counter()
    claim_id, messages = driver.claim_controller.create(
        name, CLAIM, project=PROJECT, limit=10)
    latency = (time.perf_counter() - started) * 1000
    for message in messages:
        driver.message_controller.delete(name, message['id'],
                                         project=PROJECT, claim=claim_id)
    return latency


def overflow(driver, args):
    return retention.overflow(driver, args,
                              lambda name: claim_ms(driver, name))


def timed(call):
    started = time.perf_counter()
    result = call()
    return result, time.perf_counter() - started


def gc_pass(driver, names_, repeats=3):
    """Median seconds of gc's step over the queues ``names_`` (what
    driver.gc() runs for each queue container), and of the retention
    cleanup alone."""
    containers = [names.container(names.MESSAGES, n, PROJECT)
                  for n in names_]
    whole = [timed(lambda: driver.gc_each(
        (c, functools.partial(driver._gc_and_clean, c))
        for c in containers))[1] for _ in range(repeats)]
    alone = [timed(lambda: [driver.clean_queue(n, PROJECT)
                            for n in names_])[1] for _ in range(repeats)]
    return statistics.median(whole), statistics.median(alone)


def cleanup_pass(driver, args):
    keep = {'time': 3600, 'length': args.queue_size * 2}
    empty = [queue(driver, keep) for _ in range(args.queues)]
    full = [queue(driver, keep) for _ in range(args.queues)]
    for name in full:
        post_many(driver, name, args.queue_size)
    return gc_pass(driver, empty), gc_pass(driver, full)


def removal(driver, clock, sizes):
    timings = {}
    for size in sizes:
        name = queue(driver, {'time': 60})
        post_many(driver, name, size)
        clock['now'] += 61 * 1000
        removed, seconds = timed(lambda: driver.clean_queue(name, PROJECT))
        assert removed == size, (removed, size)
        timings[size] = seconds
    return timings


def run(args):
    with RedisServer() as redis, SwiftServer() as swift:
        driver = make_driver(redis.url, swift)
        rows = overflow(driver, args)
        empty, full = cleanup_pass(driver, args)
        clock = {'now': int(time.time() * 1000)}
        driver.use_clock(lambda: clock['now'])
        removed = removal(driver, clock, (args.removal, args.removal * 5))
    report(args, rows, empty, full, removed)


def report(args, rows, empty, full, removed):
    print('retention on Swift (single node; sizes scaled down, see --help): '
          '%s posted 10 per call, then %d claims of 10 with 10 posted '
          'before each' % (format(args.posted, ','), args.claims))
    print('%-20s %12s %22s' % ('queue', 'posts/s', 'claim med / p90 ms'))
    for label, (rate, latencies) in rows.items():
        print('%-20s %12.0f %10.1f / %7.1f' % (
            label, rate, statistics.median(latencies),
            percentile(latencies, 90)))
    (base_rate, base), (rate, kept) = rows.values()
    print('ratios (retention / without): post throughput %.2fx slower, '
          'claim median %.2fx, p90 %.2fx (target <= 1.2)' % (
              base_rate / rate, statistics.median(kept) /
              statistics.median(base),
              percentile(kept, 90) / percentile(base, 90)))
    print('cleanup pass over %d queues, gc step / retention cleanup alone: '
          'empty %.3f / %.3f s, %s messages each with nothing to remove '
          '%.3f / %.3f s: ratio %.2fx / %.2fx (target <= 2)' % (
              args.queues, empty[0], empty[1], format(args.queue_size, ','),
              full[0], full[1], full[0] / empty[0], full[1] / empty[1]))
    per = {size: seconds / size * 1000 for size, seconds in removed.items()}
    small, large = sorted(per)
    print('removal past time per message: %s' % ', '.join(
        '%s: %.2f ms' % (format(size, ','), per[size])
        for size in (small, large)))
    print('removal per-message cost ratio, %s vs %s: %.2fx (O(N): about '
          '1)' % (format(large, ','), format(small, ','),
                  per[large] / per[small]))


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split('\n', 1)[1])
    parser.add_argument('--posted', type=int, default=3000)
    parser.add_argument('--length', type=int, default=1000)
    parser.add_argument('--queues', type=int, default=10)
    parser.add_argument('--queue-size', type=int, default=1000)
    parser.add_argument('--claims', type=int, default=40)
    parser.add_argument('--removal', type=int, default=100,
                        help='the smaller N (the larger is 5 N)')
    parser.add_argument('--quick', action='store_true',
                        help='tiny sizes, to check that everything runs')
    args = parser.parse_args(argv)
    if args.quick:
        args.posted, args.length, args.queues = 200, 50, 2
        args.queue_size, args.claims, args.removal = 50, 5, 10
    run(args)


if __name__ == '__main__':
    main()
