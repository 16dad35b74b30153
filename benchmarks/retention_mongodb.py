"""Retention on the MongoDB driver: what it costs (issue 10 targets).

    python -m benchmarks.retention_mongodb [--mongodb-uri URI] [--quick]

Three figures, each printed with its ratio:

1. claim latency (claims of 10, then deleted) and post throughput on a
   queue whose retention ``length`` is L, kept overflowing (P posted, and
   10 more before every claim), against the same queue without retention;
   target 1.2x. Both queues live in one database, measured alternately.
2. one cleanup pass (each queue's gc step, which ends with clean_queue)
   over Q queues of L messages with nothing to remove, against Q empty
   queues; target 2x. The store calls per queue are printed too.
3. removing N messages that retention no longer keeps (by age) with
   clean_queue, for two N: time per message; O(N) means equal figures.

Defaults are the issue's sizes (L 10,000, P 100,000, Q 100; N 10,000 and
40,000) on a real server (``--mongodb-uri`` or
ZAQAR_DELAY_TEST_MONGODB_URI). Without one it runs on mongomock at sizes
a hundred times smaller (L 100, P 1,000, Q 10; N 200 and 800): mongomock
is an in-process fake that scans a whole collection for every query (it
has no index), so its figures show that the code runs and how many store
calls it makes, not what a MongoDB server would take. A redis-server is
started for the queue metadata (Zaqar's control driver).
"""

import statistics
import sys
import time
import uuid

from benchmarks import report
from localstack import backends
from localstack.redis_server import RedisServer

PROJECT = 'bench'
CLIENT = uuid.uuid4()
GROUP = 'drivers:message_store:delay.mongodb'


def make_driver(redis_url, uri):
    from localstack.factories import mongodb as mongodb_factory
    from zaqar_delay.drivers.mongodb import driver
    conf = backends.make_conf()
    conf.set_override('database', 'zd_bench_' + uuid.uuid4().hex[:8],
                      group=GROUP)
    factory = None
    if uri:
        conf.set_override('uri', uri, group=GROUP)
    else:
        factory = mongodb_factory.mongomock_client_factory()
    conf.set_override('socket_timeout', 120, group=GROUP)
    return driver.DataDriver(conf, None,
                             backends.control_driver(conf, redis_url),
                             client_factory=factory)


def make_queue(driver, metadata=None):
    name = 'q-' + uuid.uuid4().hex[:8]
    driver.queue_controller.create(name, metadata=metadata or {},
                                   project=PROJECT)
    return name


def post(driver, queue, count, batch=10):
    """Post ``count`` messages in batches; seconds taken."""
    started = time.perf_counter()
    for start in range(0, count, batch):
        driver.message_controller.post(
            queue, [{'ttl': 86400, 'body': n}
                    for n in range(start, min(count, start + batch))],
            CLIENT, project=PROJECT)
    return time.perf_counter() - started


def claim_once(driver, queue):
    """One claim of 10 (its messages deleted after); ms the claim took."""
    started = time.perf_counter()
    claim_id, messages = driver.claim_controller.create(
        queue, {'ttl': 300, 'grace': 60}, project=PROJECT, limit=10)
    took = (time.perf_counter() - started) * 1000
    for message in messages:
        driver.message_controller.delete(queue, message['id'],
                                         project=PROJECT, claim=claim_id)
    return took


def overflow(driver, length, posted, samples):
    kept = make_queue(driver, {'_retention': {'length': length}})
    plain = make_queue(driver)
    for queue in (kept, plain):
        post(driver, queue, posted - samples * 10)
    latency = {kept: [], plain: []}
    rate = {kept: [], plain: []}
    for _ in range(samples):
        for queue in (kept, plain):
            rate[queue].append(10 / post(driver, queue, 10))
            latency[queue].append(claim_once(driver, queue))
    ours, base = (statistics.median(latency[q]) for q in (kept, plain))
    print('claim latency, length {:,} overflowing ({:,} posted), median of '
          '{}: {:.2f} ms vs {:.2f} ms without retention: ratio '
          '{:.2f}x (target <= 1.2x)'.format(length, posted, samples, ours,
                                            base, ours / base))
    ours, base = (statistics.median(rate[q]) for q in (kept, plain))
    print('post throughput on the same queues: {:,.0f} vs {:,.0f} msg/s: '
          'ratio {:.2f}x of the plain queue (target >= 1/1.2 = 0.83x)'.format(
              ours, base, ours / base))


class CountedCalls:
    """Counts the calls made through the driver's guarded collections."""

    def __init__(self, driver):
        self.count = 0
        self._undo = []
        for name in ('messages', 'claims', 'counters', 'moves'):
            collection = getattr(driver, name)
            for method in ('find', 'find_one', 'count_documents',
                           'update_one', 'update_many', 'delete_many'):
                real = getattr(collection, method)
                setattr(collection, method, self._counted(real))
                self._undo.append((collection, method))

    def _counted(self, real):
        def run(*args, **kwargs):
            self.count += 1
            return real(*args, **kwargs)
        return run

    def close(self):
        for collection, method in self._undo:
            delattr(collection, method)


def cleanup_pass(driver, queues, length):
    from zaqar_delay.drivers.mongodb import fields
    full = [make_queue(driver, {'_retention': {'length': length,
                                               'time': 86400}})
            for _ in range(queues)]
    empty = [make_queue(driver, {'_retention': {'length': length,
                                                'time': 86400}})
             for _ in range(queues)]
    for queue in full:
        post(driver, queue, length, batch=100)
    for queue in empty:
        # An empty queue that had messages: its counter stays, as gc sees.
        post(driver, queue, 1)
        driver.message_controller.pop(queue, 1, project=PROJECT)

    def one_pass(names):
        counters = [driver.counters.find_one(
            fields.queue_filter(name, PROJECT)) for name in names]
        calls = CountedCalls(driver)
        started = time.perf_counter()
        for counter in counters:
            driver._gc_queue(counter)
        took = time.perf_counter() - started
        calls.close()
        return took, calls.count / len(names)

    runs = {'full': [], 'empty': []}
    for _ in range(3):
        runs['full'].append(one_pass(full))
        runs['empty'].append(one_pass(empty))
    (full_s, full_calls), (empty_s, empty_calls) = (
        min(runs[kind]) for kind in ('full', 'empty'))
    print('cleanup pass, nothing to remove: {} queues of {:,} messages '
          '{:.3f} s ({:.0f} store calls per queue) vs {} empty queues '
          '{:.3f} s ({:.0f} calls per queue): ratio {:.2f}x '
          '(target <= 2x)'.format(
              queues, length, full_s, full_calls, queues, empty_s,
              empty_calls, full_s / empty_s))


def removal_cost(driver, counts):
    per_message = []
    for count in counts:
        queue = make_queue(driver, {'_retention': {'time': 60}})
        post(driver, queue, count, batch=100)
        start = driver.now()
        driver.use_clock(lambda: start + 61_000)
        started = time.perf_counter()
        removed = driver.clean_queue(queue, PROJECT)
        took = time.perf_counter() - started
        driver.use_clock(None)
        assert removed == count, (removed, count)
        per_message.append(took / count * 1e6)
        print('removing {:,} messages past retention time: {:.3f} s, '
              '{:.1f} us per message'.format(count, took, per_message[-1]))
    print('time per message, {:,} vs {:,}: ratio {:.2f}x '
          '(O(N): about 1x)'.format(
              counts[1], counts[0], per_message[1] / per_message[0]))


def main(argv=None):
    parser = report.mongodb_parser(__doc__)
    parser.add_argument('--length', type=int)
    parser.add_argument('--posted', type=int)
    parser.add_argument('--queues', type=int)
    parser.add_argument('--samples', type=int)
    args = parser.parse_args(argv)
    small = args.quick or not args.mongodb_uri
    length = args.length or (100 if small else 10_000)
    posted = args.posted or (1_000 if small else 100_000)
    queues = args.queues or (10 if small else 100)
    samples = args.samples or (10 if small else 50)
    counts = (200, 800) if small else (10_000, 40_000)
    with RedisServer() as redis_server:
        driver = make_driver(redis_server.url, args.mongodb_uri)
        print('#### MongoDB retention on {}'.format(
            args.mongodb_uri or 'mongomock (no server given): sizes scaled '
            'down; mongomock scans whole collections, so the times are '
            'mongomock\'s, the store calls are the driver\'s'))
        overflow(driver, length, posted, samples)
        cleanup_pass(driver, queues, length)
        removal_cost(driver, counts)
        driver.close()


if __name__ == '__main__':
    sys.exit(main())
