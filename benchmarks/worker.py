"""The delayed-event worker against a plain python-zaqarclient loop.

    python -m benchmarks.worker [--events 2000] [--rounds 3]

Starts one redis-server and one ``zaqar-server`` on our Redis driver, then
alternates, round by round, between (a) a plain python-zaqarclient loop
(claim 10, delete each) and (b) one ``zaqar_delay.worker.App`` with a
no-op handler, each draining its own queue of ``--events`` events, and
prints events/s and the ratio worker / plain. Then measures delay accuracy:
events enqueued with delays of 1 to 5 s, and how late after being due the
handler runs (median and p99), for a few poll intervals.
"""

import argparse
import random
import statistics
import threading
import time
import uuid

from zaqarclient.queues.v2 import client as zaqar_client

from localstack.redis_server import RedisServer
from localstack.zaqar_server import ZaqarServer
from zaqar_delay.worker import App
from zaqar_delay.worker import current_event
from zaqar_delay.worker import Settings

BATCH = 10


def fill(app, events):
    app.enqueue_many([{'n': n} for n in range(events)], type='Bench')


def plain_loop(url, events):
    """Events/s of the loop an application would write by hand."""
    project = 'plain-' + uuid.uuid4().hex[:8]
    fill(App(url, project=project), events)
    client = zaqar_client.Client(url, version=2, conf={'auth_opts': {
        'backend': 'noauth', 'options': {'os_project_id': project}}})
    queue = client.queue('Bench', auto_create=False)
    done = 0
    started = time.perf_counter()
    while done < events:
        for message in queue.claim(ttl=60, grace=60, limit=BATCH):
            message.delete()
            done += 1
    return events / (time.perf_counter() - started)


def worker(url, events, parallelism):
    project = 'worker-' + uuid.uuid4().hex[:8]
    app = App(url, project=project, settings=Settings(batch_size=BATCH))
    fill(app, events)
    app.add_handler('Bench', lambda event: None, parallelism=parallelism)
    started = time.perf_counter()
    app.start()
    while app.counts.total('handled') < events:
        time.sleep(0.002)
    elapsed = time.perf_counter() - started
    app.close()
    return events / elapsed


def lateness(url, count, poll_interval):
    """(median, p99) seconds between an event's due time and its handler."""
    project = 'late-' + uuid.uuid4().hex[:8]
    app = App(url, project=project,
              settings=Settings(poll_interval=poll_interval))
    late, lock, done = [], threading.Lock(), threading.Event()

    def handle(event):
        with lock:
            late.append(time.time() - current_event().due)
            if len(late) == count:
                done.set()

    app.add_handler('Late', handle, parallelism=4)
    app.start()
    for _ in range(count):
        app.enqueue({}, type='Late', delay=random.randint(1, 5))
    done.wait(120)
    app.close()
    late.sort()
    return statistics.median(late), late[int(0.99 * (len(late) - 1))]


def throughput(url, args, parallelisms):
    plain, ours = [], {p: [] for p in parallelisms}
    for _ in range(args.rounds):
        plain.append(plain_loop(url, args.events))
        for p in parallelisms:
            ours[p].append(worker(url, args.events, p))
    base = statistics.median(plain)
    print('events/s, one process, no-op handler, claim batch {}, '
          'median of {} rounds of {} events'.format(
              BATCH, args.rounds, args.events))
    print('{:<42}{:>10.0f}'.format(
        'plain python-zaqarclient claim/delete', base))
    for p in parallelisms:
        rate = statistics.median(ours[p])
        print('{:<42}{:>10.0f}   ratio {:.2f}x'.format(
            'zaqar-delay-worker, parallelism %d' % p, rate,
            rate / base), flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--events', type=int, default=2000)
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--parallelism', type=int, action='append',
                        help='worker handler parallelism (repeatable; '
                             'default 1 and 4)')
    parser.add_argument('--late-events', type=int, default=200)
    parser.add_argument('--no-throughput', action='store_true',
                        help='measure delay accuracy only')
    args = parser.parse_args(argv)
    parallelisms = args.parallelism or [1, 4]
    with RedisServer() as redis:
        server = ZaqarServer(redis.url, 'delay.redis', {
            'uri': redis.url.replace('redis://', 'delay.redis://')}).start()
        try:
            url = server.url
            if not args.no_throughput:
                throughput(url, args, parallelisms)
            print('\ndelay accuracy: seconds late after due ({} events, '
                  'delays 1-5 s)'.format(args.late_events))
            for poll in (1.0, 0.1):
                median, p99 = lateness(url, args.late_events, poll)
                print('poll_interval {:<5} median {:.3f}   p99 {:.3f}'.format(
                    poll, median, p99), flush=True)
        finally:
            server.stop()

if __name__ == '__main__':
    main()
