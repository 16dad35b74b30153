"""What persistent consumers cost on the MongoDB driver (issue 11).

    python -m benchmarks.consumers_mongodb [--mongodb-uri URI] [--quick]

Figures and ratios, in one run:

* ``post``: P messages posted (10 per call) to a queue with C persistent
  consumers (``consumers_required`` set) and to one without any, taking
  turns call by call; target ratio <= 1.2 (a post reads no consumer).
* ``post, reservations``: the same posts (no consumer) with the driver
  as it is, which records each post's positions until its insert is
  answered (one update more: reservations.py), and with a bare ``$inc``
  as before that, taking turns call by call: the cost of never letting a
  consumer pass a post still storing.
* ``resume``: a consumer whose cursor has B messages behind it and one
  that resumes at the head of the same queue, each listing a page of 10
  without a marker R times, taking turns; median latency; target <= 1.2
  (the page starts at the cursor through the ``{p, q, k}`` index).
* ``read-by-all removal``: clean_queue removing N messages read by the
  consumer from a queue of 10 N and of 100 N, then 5 N from the larger:
  time per removed message (O(removed): ratios about 1).

Defaults are the issue's sizes (P 20,000, C 100, B 100,000, R 300,
N 1,000) on a real server (``--mongodb-uri`` or
ZAQAR_DELAY_TEST_MONGODB_URI). Without one it runs on mongomock at sizes
a hundred times smaller (C stays 100): mongomock scans a whole
collection for every query (it has no index), so its resume and removal
ratios show mongomock's scans, not the driver's index use; only a real
server's figures measure the targets.
"""

import contextlib
import statistics
import sys
import time

import pymongo

from benchmarks import report
from benchmarks.consumers import resume_page, subscribe
from benchmarks.retention_mongodb import PROJECT, make_driver, make_queue
from benchmarks.retention_mongodb import post
from localstack.redis_server import RedisServer
from zaqar_delay.drivers.mongodb import fields
from zaqar_delay.drivers.mongodb import reservations


def posting(driver, posted, count):
    """{label: posts/s} with and without consumers, taking turns."""
    required = {'_retention': {'consumers_required': count}}
    queues = {'no consumers': make_queue(driver, required),
              '%d consumers' % count: make_queue(driver, required)}
    subscribe(driver, queues['%d consumers' % count], count)
    seconds = dict.fromkeys(queues, 0.0)
    for _ in range(0, posted, 10):
        for label, name in queues.items():
            seconds[label] += post(driver, name, 10)
    return {label: posted / seconds[label] for label in queues}


@contextlib.contextmanager
def bare_inc():
    """Positions taken with a bare ``$inc``, nothing recorded: the post
    as it was before reservations (its race with persistent consumers
    included)."""
    reserve, release = reservations.reserve, reservations.release

    def take(driver, queue, project, count, now, token=None):
        doc = driver.counters.find_one_and_update(
            fields.queue_filter(queue, project), {'$inc': {'n': count}},
            projection={'n': True}, upsert=True,
            return_document=pymongo.ReturnDocument.AFTER)
        return doc['n'] - count + 1, token

    reservations.reserve = take
    reservations.release = lambda *args: None
    try:
        yield
    finally:
        reservations.reserve, reservations.release = reserve, release


def reserving(driver, posted):
    """{label: posts/s} of the driver as it is and with bare_inc."""
    queues = {'recorded': make_queue(driver), 'bare $inc': make_queue(driver)}
    seconds = dict.fromkeys(queues, 0.0)
    for _ in range(0, posted, 10):
        seconds['recorded'] += post(driver, queues['recorded'], 10)
        with bare_inc():
            seconds['bare $inc'] += post(driver, queues['bare $inc'], 10)
    return {label: posted / seconds[label] for label in queues}


def position(driver, name, index):
    """The position of the queue's ``index``-th message (from 0)."""
    doc = driver.messages.raw.find(
        fields.queue_filter(name, PROJECT), {fields.POSITION: True}).sort(
            fields.POSITION, 1).skip(index).limit(1)[0]
    return doc[fields.POSITION]


def move_cursor(driver, name, consume_id, cursor):
    update = driver.message_controller._consumer_update
    update(name, PROJECT, consume_id, None, cursor, 0)
    update(name, PROJECT, consume_id, cursor, None, 0)


def resuming(driver, behind, resumes):
    """{label: [ms of one resume]}."""
    name = make_queue(driver)
    post(driver, name, behind + 100)
    far, head = subscribe(driver, name, 2)
    move_cursor(driver, name, far, position(driver, name, behind - 1))

    def resume(consume_id):
        return resume_page(driver, name, consume_id) * 1000
    labels = {'%s behind the cursor' % format(behind, ','): far,
              'at the head': head}
    runs = {label: [] for label in labels}
    for _ in range(resumes):
        for label, consume_id in labels.items():
            runs[label].append(resume(consume_id))
    return runs


def removal(driver, size, steps):
    """[s per removed message] of clean_queue removing ``steps[0]``,
    then ``steps[1]``... messages read by all from a queue of ``size``."""
    name = make_queue(driver, {'_retention': {'consumers_required': 1}})
    reader, = subscribe(driver, name, 1)
    post(driver, name, size)
    costs = []
    for removed in steps:
        move_cursor(driver, name, reader, position(driver, name,
                                                   removed - 1))
        started = time.perf_counter()
        done = driver.clean_queue(name, PROJECT)
        costs.append((time.perf_counter() - started) / removed)
        assert done == removed, (done, removed)
    return costs


def run(driver, args):
    report.post_ratio(args.posted,
                      posting(driver, args.posted, args.consumers))
    rates = reserving(driver, args.posted)
    print('post, reservations, 10 per call, %s messages: %s' % (
        format(args.posted, ','),
        ', '.join('%s %.0f/s' % item for item in rates.items())))
    recorded, bare = rates.values()
    print('ratio post throughput bare $inc / recorded reservations: %.2fx'
          % (bare / recorded), flush=True)
    report.resume_ratio({label: statistics.median(times) for label, times
                         in resuming(driver, args.behind,
                                     args.resumes).items()}, 2)
    n = args.removed
    per = []
    for size, steps in ((n * 10, [n]), (n * 100, [n, n * 5])):
        for step, cost in zip(steps, removal(driver, size, steps)):
            per.append(cost * 1e6)
            print('read-by-all removal of %s from %s: %.1f us per message'
                  % (format(step, ','), format(size, ','), per[-1]),
                  flush=True)
    small, large, more = per
    print('ratios per removed message: queue 10x larger %.2fx; 5x more '
          'removed %.2fx (O(removed): about 1)' % (large / small,
                                                   more / large))


def main(argv=None):
    parser = report.mongodb_parser(__doc__)
    parser.add_argument('--posted', type=int)
    parser.add_argument('--consumers', type=int, default=100)
    parser.add_argument('--behind', type=int)
    parser.add_argument('--resumes', type=int)
    parser.add_argument('--removed', type=int)
    args = parser.parse_args(argv)
    scale = 100 if args.quick or not args.mongodb_uri else 1
    args.posted = args.posted or 20_000 // scale
    args.behind = args.behind or 100_000 // scale
    args.resumes = args.resumes or max(10, 300 // scale)
    args.removed = args.removed or max(5, 1_000 // scale)
    with RedisServer() as redis_server:
        driver = make_driver(redis_server.url, args.mongodb_uri)
        print('#### MongoDB persistent consumers on {}'.format(
            args.mongodb_uri or 'mongomock (no server given): sizes scaled '
            'down 100x; mongomock scans whole collections, so resume and '
            'removal times are mongomock\'s'))
        run(driver, args)
        driver.close()


if __name__ == '__main__':
    sys.exit(main())
