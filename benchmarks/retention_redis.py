"""What retention costs on Redis (issue 10), against the same work without.

    python -m benchmarks.retention_redis [--quick] [--posted 100000]
        [--length 10000] [--queues 100] [--queue-size 10000] [--claims 1000]

Starts one redis-server and prints figures and ratios side by side:

* ``overflow``: ``--posted`` messages posted (10 per call) to a queue with
  retention ``length`` ``--length``, then claims of 10 (each deleted) with
  10 more posted before each, so the queue stays in steady overflow; the
  same on a queue without retention. Post throughput and claim latency
  (median, p99); target ratio <= 1.2.
* ``cleanup pass``: what ``driver.gc()`` does for each queue (settle,
  then the retention cleanup) over ``--queues`` queues of
  ``--queue-size`` messages each with nothing to remove (time 1 hour,
  length above the size), against the same pass over as many empty
  queues with the same retention, the two taking turns five times
  (medians); target ratio <= 2.
* ``removal``: the cleanup removing N messages past retention ``time``,
  for two N: time per message (O(N) when the two are about equal).

Time is moved with the driver's test clock, so "past time" is exact.
``--quick`` divides every size by 10 (for a smoke run, not for figures).
"""

import statistics
import time

import redis as redis_py

from benchmarks import report
from benchmarks.bounded import (CLAIM, PROJECT, make_driver, percentile,
                                post_many, redis_cpu_ms)
from benchmarks import retention
from benchmarks.retention import queue
from localstack.redis_server import RedisServer
from zaqar_delay.drivers.redis import layout


def claim_ms(raw, driver, name):
    """(latency, Redis CPU) in ms of one claim of 10 (its messages then
    deleted)."""
    (claim_id, messages), wall, cpu = timed(
        raw, lambda: driver.claim_controller.create(
            name, CLAIM, project=PROJECT, limit=10))
    for message in messages:
        driver.message_controller.delete(name, message['id'],
                                         project=PROJECT, claim=claim_id)
    return wall * 1000, cpu * 1000


def overflow(raw, driver, args):
    """{label: (posts/s, claim (latency, Redis CPU) ms)}."""
    return retention.overflow(driver, args,
                              lambda name: claim_ms(raw, driver, name))


def timed(raw, call):
    """(result, wall seconds, seconds of Redis CPU) of ``call()``: the
    CPU time of Redis' main thread does not grow when the machine is busy
    and Redis waits for a core, so it is the steadier figure."""
    cpu, started = redis_cpu_ms(raw), time.perf_counter()
    result = call()
    return (result, time.perf_counter() - started,
            (redis_cpu_ms(raw) - cpu) / 1000)


def gc_pass(raw, driver, names):
    """(wall, Redis CPU) seconds of one gc pass over the queues
    ``names``: what ``driver.gc()`` does for each registered queue."""
    return timed(raw, lambda: driver.gc_each(
        driver._gc_one(PROJECT, name) for name in names))[1:]


def empty_store(raw):
    """Flush Redis, leaving what a driver's first call writes into an
    empty store: its layout version, which every gc pass reads again."""
    raw.flushall(asynchronous=True)
    layout.version(raw)


def cleanup_pass(raw, driver, args, repeats=5):
    """Median (wall, Redis CPU) of gc passes over ``--queues`` empty
    queues and as many full ones, with retention that removes nothing;
    the two kinds of pass take turns."""
    keep = {'time': 3600, 'length': args.queue_size * 2}
    empty_store(raw)
    empty = [queue(driver, keep) for _ in range(args.queues)]
    full = [queue(driver, keep) for _ in range(args.queues)]
    for name in full:
        post_many(driver, name, args.queue_size)
    runs = {'empty': [], 'full': []}
    for _ in range(repeats):
        runs['empty'].append(gc_pass(raw, driver, empty))
        runs['full'].append(gc_pass(raw, driver, full))
    return [tuple(statistics.median(run[i] for run in runs[kind])
                  for i in (0, 1)) for kind in ('empty', 'full')]


def removal(raw, driver, clock, sizes):
    """{N: (wall, Redis CPU) seconds the cleanup took to remove N
    messages past time}."""
    timings = {}
    for size in sizes:
        empty_store(raw)
        name = queue(driver, {'time': 60})
        post_many(driver, name, size)
        clock['now'] += 61 * 1000
        removed, wall, cpu = timed(
            raw, lambda: driver.clean_queue(name, PROJECT))
        timings[size] = (wall, cpu)
        assert removed == size, (removed, size)
    return timings


def run(args):
    server = RedisServer().start()
    try:
        raw = redis_py.Redis.from_url(server.url, socket_timeout=300)
        driver = make_driver(server.url)
        report_overflow(args, overflow(raw, driver, args))
        report_cleanup(args, *cleanup_pass(raw, driver, args))
        clock = {'now': int(time.time() * 1000)}
        driver.use_clock(lambda: clock['now'])
        sizes = (args.queue_size, args.queue_size * 5)
        report_removal(removal(raw, driver, clock, sizes))
    finally:
        server.stop()


def report_overflow(args, rows):
    print('retention on Redis: %s posted 10 per call, then %d claims of 10 '
          'with 10 posted before each' % (format(args.posted, ','),
                                          args.claims))
    print('%-20s %10s %22s %24s' % ('queue', 'posts/s', 'claim med / p99 ms',
                                    'claim Redis CPU med ms'))
    for label, (rate, claims) in rows.items():
        latencies = [wall for wall, _ in claims]
        print('%-20s %10.0f %10.2f / %7.2f %24.3f' % (
            label, rate, statistics.median(latencies),
            percentile(latencies, 99),
            statistics.median(cpu for _, cpu in claims)))
    (base_rate, base), (rate, kept) = rows.values()

    def ratio(pick):
        return pick([c[0] for c in kept]) / pick([c[0] for c in base])

    print('ratios (retention / without): post throughput %.2fx slower, '
          'claim median %.2fx, p99 %.2fx (target <= 1.2); claim Redis CPU '
          'median %.2fx' % (
              base_rate / rate, ratio(statistics.median),
              ratio(lambda values: percentile(values, 99)),
              statistics.median(c[1] for c in kept)
              / statistics.median(c[1] for c in base)), flush=True)


def report_cleanup(args, empty, full):
    print('cleanup pass (gc) over %d queues, wall / Redis CPU: empty '
          '%.3f / %.3f s, %s messages each with nothing to remove %.3f / '
          '%.3f s: ratio %.2fx / %.2fx (target <= 2)' % (
              args.queues, empty[0], empty[1], format(args.queue_size, ','),
              full[0], full[1], full[0] / empty[0], full[1] / empty[1]),
          flush=True)


def report_removal(removed):
    per = {size: (wall / size * 1e6, cpu / size * 1e6)
           for size, (wall, cpu) in removed.items()}
    small, large = sorted(per)
    print('removal past time, wall / Redis CPU per message: %s' % ', '.join(
        '%s: %.1f / %.1f us' % ((format(size, ','),) + per[size])
        for size in (small, large)))
    print('removal per-message cost ratio, %s vs %s: %.2fx wall, %.2fx '
          'Redis CPU (O(N): about 1)' % (
              format(large, ','), format(small, ','),
              per[large][0] / per[small][0],
              per[large][1] / per[small][1]))


def main():
    run(report.sizes(__doc__, dict(posted=100000, length=10000, queues=100,
                                   queue_size=10000, claims=1000)))


if __name__ == '__main__':
    main()
