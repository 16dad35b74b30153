"""What persistent consumers cost on Swift (issue 11).

    python -m benchmarks.consumers_swift [--quick] [--posted 300]
        [--consumers 100] [--behind 1000] [--resumes 30] [--removed 100]
        [--cuts 20]

Starts one redis-server (Zaqar's queue catalogue) and one real single-node
Swift and prints figures and ratios in one run. Sizes are scaled down from
the issue's (20,000 posted, 100,000 behind the cursor, 1,000 removed): a
Swift request costs milliseconds and posting 100,000 messages would take
hours on a test machine.

* ``post``: ``--posted`` messages posted (10 per call) to a queue with
  ``--consumers`` persistent consumers (``consumers_required`` set) and
  to one without, taking turns call by call; target ratio <= 1.2.
* ``resume``: a consumer with ``--behind`` messages behind its cursor and
  one at the head of the same queue each list a page of 10 without a
  marker ``--resumes`` times, taking turns; target ratio <= 1.2 (the
  listing starts at the cursor's name, Swift's own index).
* ``read-by-all removal``: the cleanup removing ``--removed`` messages
  read by the consumer from a queue of 5 times as many and of 20 times as
  many: time per removed message (O(removed): ratio about 1).
* ``read-by-all cut``: what every claim, pop and listing of a queue with
  ``consumers_required`` spends on its consumers, ``--cuts`` times: on
  ``--consumers`` and on 5 times as many, walking the cursor index
  (``read_cut_index_from`` 0), and on the larger queue listing every
  consumer as before it (``read_cut_index_from`` above their number):
  Swift requests and time per cut (the index: ratio about 1).

``--quick`` divides every size by 10 (a smoke run, not for figures).
"""

import statistics
import time

from benchmarks import report
from benchmarks.consumers import resume_page, subscribe
from benchmarks.retention import PROJECT, post_seconds, queue
from benchmarks.retention_swift import (count_requests, make_driver,
                                        post_many)
from localstack.redis_server import RedisServer
from localstack.swift_server import SwiftServer


def positions(driver, name):
    qs = driver.queue_state(name, PROJECT)
    return [int(e['name'][2:])
            for e in driver.store.listing_all(qs.c, 'p/')]


def acknowledge(driver, name, consume_id, cursor):
    update = driver.message_controller._consumer_update
    update(name, PROJECT, consume_id, None, cursor, 0)
    update(name, PROJECT, consume_id, cursor, None, 0)


def posting(driver, args):
    required = {'consumers_required': args.consumers}
    loaded = '%d consumers' % args.consumers
    queues = {'no consumers': queue(driver, required),
              loaded: queue(driver, required)}
    subscribe(driver, queues[loaded], args.consumers)
    seconds = dict.fromkeys(queues, 0.0)
    for start in range(0, args.posted, 10):
        for label, name in queues.items():
            seconds[label] += post_seconds(driver, name, start)
    return {label: args.posted / seconds[label] for label in queues}


def resuming(driver, args):
    name = queue(driver)
    post_many(driver, name, args.behind + 20)
    behind, head = subscribe(driver, name, 2)
    acknowledge(driver, name, behind, positions(driver, name)[args.behind
                                                              - 1])

    def resume(consume_id):
        return resume_page(driver, name, consume_id)
    labels = {'%s behind the cursor' % format(args.behind, ','): behind,
              'at the head': head}
    runs = {label: [] for label in labels}
    for _ in range(args.resumes):
        for label, consume_id in labels.items():
            runs[label].append(resume(consume_id))
    return {label: statistics.median(r) * 1000 for label, r in runs.items()}


def removal(driver, size, removed):
    name = queue(driver, {'consumers_required': 1})
    reader, = subscribe(driver, name, 1)
    post_many(driver, name, size)
    acknowledge(driver, name, reader, positions(driver, name)[removed - 1])
    started = time.perf_counter()
    done = driver.clean_queue(name, PROJECT)
    seconds = time.perf_counter() - started
    assert done == removed, (done, removed)
    return seconds / removed


def read_cut(redis_url, swift, count, index_from, cuts):
    """(ms, Swift requests) per read-by-all cut of a queue with ``count``
    consumers, on a driver that walks the index from ``index_from``."""
    driver = make_driver(redis_url, swift, read_cut_index_from=index_from)
    name = queue(driver, {'consumers_required': 1})
    subscribe(driver, name, count)
    sent = count_requests(driver)
    seconds = []
    for _ in range(cuts):
        started = time.perf_counter()
        driver.message_controller.retention_of(name, PROJECT)
        seconds.append(time.perf_counter() - started)
    driver.close()
    return statistics.median(seconds) * 1000, len(sent) / cuts


def print_read_cuts(redis_url, swift, args):
    small, large = args.consumers, args.consumers * 5
    runs = [(label, read_cut(redis_url, swift, count, index_from,
                             args.cuts))
            for label, count, index_from in (
                ('%d consumers, index' % small, small, 0),
                ('%d consumers, index' % large, large, 0),
                ('%d consumers, listing all' % large, large, large))]
    for label, (ms, requests) in runs:
        print('read-by-all cut, %-28s %8.2f ms %6.1f requests' % (
            label, ms, requests))
    print('read-by-all cut, index %d / %d consumers: %.2fx time, %.2fx '
          'requests (about 1); listing all / index at %d: %.2fx time' % (
              large, small, runs[1][1][0] / runs[0][1][0],
              runs[1][1][1] / runs[0][1][1], large,
              runs[2][1][0] / runs[1][1][0]))


def run(args):
    with RedisServer() as redis, SwiftServer() as swift:
        driver = make_driver(redis.url, swift)
        report.post_ratio(args.posted, posting(driver, args))
        report.resume_ratio(resuming(driver, args), 1)
        small = removal(driver, args.removed * 5, args.removed)
        large = removal(driver, args.removed * 20, args.removed)
        print('read-by-all removal of %d: %.2f ms per message from %d, '
              '%.2f ms from %d; ratio %.2fx (O(removed): about 1)' % (
                  args.removed, small * 1000, args.removed * 5,
                  large * 1000, args.removed * 20, large / small))
        print_read_cuts(redis.url, swift, args)


def main():
    run(report.sizes(__doc__, dict(posted=300, consumers=100, behind=1000,
                                   resumes=30, removed=100, cuts=20),
                     quick_min=2))


if __name__ == '__main__':
    main()
