"""Posts with Zaqar's notifier on, against the number of persistent
consumers (issue 21).

    python -m benchmarks.notifier [--quick] [--backend redis|mongodb ...]
        [--consumers 0,100,10000] [--posts 30]

``[storage] message_pipeline = zaqar.notification.notifier`` makes Zaqar
list every subscription of the queue on each post and hand each to its
notification task. Persistent consumers (``cursor:`` subscriptions) read
by listing, so our drivers leave them out of that listing
(subscriptions.py of each driver). For each count of consumers on one
queue, this prints the median latency of a post of 10 messages through
Zaqar's storage pipeline with the notifier on:

* ``ours``: our driver as it is;
* ``before``: the same driver and queue, the notifier listing every
  subscription (``list(with_consumers=True)``, what it listed before
  issue 21);
* ``zaqar``: Zaqar's own driver with the same consumers (Redis only, up
  to ``ZAQAR_UP_TO`` consumers: its subscription create reads every
  subscription of the queue, so creating 10,000 takes hours);

with the ratios before/ours and zaqar/ours, the three taking turns post
by post, and on Redis the round trips the last post of each sent to the
data store (a count, which the machine's load does not blur). The queue
has no other subscriber, so nothing is sent: the figures are the listing
and the per-subscription task dispatch. Runs with many consumers take
few posts: the ``before`` path costs seconds each. MongoDB runs on
mongomock unless ``--mongodb-uri`` (or ``ZAQAR_DELAY_TEST_MONGODB_URI``)
is given, at smaller counts (Swift: tests/swift/test_notifier.py counts
its requests).
"""

import argparse
import os
import statistics
import sys
import time
import uuid

import redis as redis_py

from benchmarks import round_trips
from benchmarks import run
from localstack import notifier
from localstack.redis_server import RedisServer

PROJECT = 'bench-notifier'
ZAQAR_UP_TO = 1000
MESSAGES = [{'ttl': 3600, 'body': n} for n in range(10)]


class EveryListing:
    """A subscription controller listing consumers too: the notifier's
    view before issue 21."""

    def __init__(self, controller):
        self._controller = controller
        self.driver = controller.driver

    def list(self, queue, project=None, marker=None, limit=10):
        return self._controller.list(queue, project=project, marker=marker,
                                     limit=limit, with_consumers=True)


def notifier_stage(pipelined):
    [stage] = [s for s in pipelined.message_controller._pipeline
               if hasattr(s, 'executor')]
    return stage


def timed_post(pipelined, queue):
    """Seconds of one post of 10, once the notifier's tasks of the post
    before have run; with the round trips it sent (Redis, else None)."""
    stage = notifier_stage(pipelined)
    while stage.executor.queue_size:
        time.sleep(0.01)
    connection = getattr(stage.subscription_controller.driver, 'connection',
                         None)
    # Not hasattr(): mongomock's client answers every attribute.
    redis = isinstance(connection, (redis_py.Redis, redis_py.RedisCluster))
    with round_trips.counting() as counter:
        started = time.perf_counter()
        pipelined.message_controller.post(
            queue, [dict(m) for m in MESSAGES], uuid.uuid4(),
            project=PROJECT)
        seconds = time.perf_counter() - started
    return seconds, counter.of(connection) if redis else None


def subscribe(driver, queue, count):
    for _ in range(count):
        driver.subscription_controller.create(
            queue, notifier.consumer_subscriber(), 3600, {}, project=PROJECT)


def setups(drivers, count):
    """{label: (pipelined driver, queue)}: ours, ours as before, Zaqar's
    when given, each queue with ``count`` consumers (ours and before share
    one)."""
    out = {}
    for name, driver in drivers.items():
        if name == 'zaqar' and count > ZAQAR_UP_TO:
            continue
        queue = 'q-%d-%s' % (count, uuid.uuid4().hex[:6])
        driver.queue_controller.create(queue, project=PROJECT)
        subscribe(driver, queue, count)
        out[name] = (notifier.notifying(driver), queue)
        if name == 'ours':
            before = notifier.notifying(driver)
            stage = notifier_stage(before)
            stage.subscription_controller = EveryListing(
                stage.subscription_controller)
            out['before'] = (before, queue)
    return out


def measure(label, drivers, counts, posts):
    """Print ours / before / zaqar per count of consumers, the three
    taking turns post by post (the machine's load drifts)."""
    print('\n#### {}: median post latency (10 messages), notifier on'.format(
        label))
    print('{:>10} {:>11} {:>11} {:>11} {:>14} {:>13} {:>17}'.format(
        'consumers', 'ours', 'before', 'zaqar', 'before / ours',
        'zaqar / ours', 'round trips o/b/z'))
    for count in counts:
        runs = setups(drivers, count)
        for pipelined, queue in runs.values():
            timed_post(pipelined, queue)  # loads scripts, connects
        # Many consumers: few posts (the before path costs seconds).
        samples = {label: [] for label in runs}
        for _ in range(max(3, posts * 100 // max(count, 100))):
            for label, (pipelined, queue) in runs.items():
                samples[label].append(timed_post(pipelined, queue))
        row = {k: statistics.median(s for s, _ in v)
               for k, v in samples.items()}
        trips = '/'.join(str(v[-1][1]) if v[-1][1] is not None else '-'
                         for v in (samples.get(k, [(0, None)])
                                   for k in ('ours', 'before', 'zaqar')))
        print('{:>10,} {:>11} {:>11} {:>11} {:>13.2f}x {:>12} {:>17}'.format(
            count, *('%.2f ms' % (row[k] * 1000) if k in row else '-'
                     for k in ('ours', 'before', 'zaqar')),
            row['before'] / row['ours'],
            '%.2fx' % (row['zaqar'] / row['ours']) if 'zaqar' in row
            else '-', trips))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--quick', action='store_true',
                        help='0, 100 and 1,000 consumers, fewer posts')
    parser.add_argument('--backend', action='append',
                        choices=('redis', 'mongodb'))
    parser.add_argument('--consumers', default='0,100,10000',
                        help='consumer counts, comma-separated (Redis)')
    parser.add_argument('--posts', type=int, default=30)
    parser.add_argument('--mongodb-uri',
                        default=os.environ.get('ZAQAR_DELAY_TEST_MONGODB_URI'))
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.consumers.split(',')]
    if args.quick:
        counts, args.posts = [0, 100, 1000], 10
    chosen = args.backend or ['redis', 'mongodb']
    with RedisServer() as server:
        if 'redis' in chosen:
            ours, theirs = run.redis_pair(server.url)
            measure('Redis ' + server.url, {'ours': ours, 'zaqar': theirs},
                    counts, args.posts)
        if 'mongodb' in chosen:
            ours, _ = run.mongodb_pair(server.url, args.mongodb_uri)
            measure('MongoDB ' + (args.mongodb_uri or 'on mongomock'),
                    {'ours': ours}, [c for c in counts if c <= 1000],
                    args.posts)


if __name__ == '__main__':
    sys.exit(main())
