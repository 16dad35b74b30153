"""What persistent consumers cost on Redis (issue 11).

    python -m benchmarks.consumers_redis [--quick] [--posted 20000]
        [--consumers 100] [--behind 100000] [--resumes 300]
        [--removed 1000]

Starts one redis-server and prints figures and ratios in one run:

* ``post``: ``--posted`` messages posted (10 per call) to a queue with
  ``--consumers`` persistent consumers registered (``consumers_required``
  set) and to one without any, the two taking turns call by call; target
  ratio <= 1.2 (a post does no per-consumer work).
* ``resume``: one consumer whose cursor has ``--behind`` messages behind
  it and one that resumes at the head of the same queue, each listing a
  page of 10 without a marker ``--resumes`` times, taking turns; median
  latency and Redis CPU; target ratio <= 1.2 (the page starts from an
  index, not by skipping entries).
* ``read-by-all removal``: the cleanup removing ``--removed`` messages read
  by every consumer from a queue of ten times as many and from one of a
  hundred times as many, and five times as many from the larger: time per
  removed message (O(removed), not O(queue): ratios about 1).

``--quick`` divides every size by 10 (a smoke run, not for figures).
"""

import statistics

import redis as redis_py

from benchmarks import report
from benchmarks.bounded import PROJECT, make_driver, post_many
from benchmarks.consumers import resume_page, subscribe
from benchmarks.retention import post_seconds, queue
from benchmarks.retention_redis import timed
from localstack.redis_server import RedisServer
from zaqar_delay.drivers.redis import keys


def posting(driver, args):
    """{label: posts/s} with and without consumers, taking turns."""
    required = {'consumers_required': args.consumers}
    queues = {'no consumers': queue(driver, required),
              '%d consumers' % args.consumers: queue(driver, required)}
    subscribe(driver, queues['%d consumers' % args.consumers],
              args.consumers)
    seconds = dict.fromkeys(queues, 0.0)
    for start in range(0, args.posted, 10):
        for label, name in queues.items():
            seconds[label] += post_seconds(driver, name, start)
    return {label: args.posted / seconds[label] for label in queues}


def position(raw, name, index):
    msgs = dict(zip(keys.QUEUE_KEY_SUFFIXES,
                    keys.queue_keys(name, PROJECT)))['msgs']
    return int(raw.zrange(msgs, index, index, withscores=True)[0][1])


def resuming(raw, driver, args):
    """{label: [(wall, Redis CPU) s of one resume]}."""
    name = queue(driver)
    post_many(driver, name, args.behind + 1000)
    behind, head = subscribe(driver, name, 2)
    cursor = position(raw, name, args.behind - 1)
    update = driver.message_controller._consumer_update
    update(name, PROJECT, behind, None, cursor, 0)
    update(name, PROJECT, behind, cursor, None, 0)

    def resume(consume_id):
        resume_page(driver, name, consume_id)
    labels = {'%s behind the cursor' % format(args.behind, ','): behind,
              'at the head': head}
    runs = {label: [] for label in labels}
    for _ in range(args.resumes):
        for label, consume_id in labels.items():
            runs[label].append(timed(raw, lambda: resume(consume_id))[1:])
    return runs


def removal(raw, driver, size, steps):
    """[(wall, Redis CPU) s per removed message] of the cleanup removing
    ``steps[0]``, then ``steps[1]``... messages read by all from a queue
    of ``size`` (the reader moving its cursor before each)."""
    raw.flushall()
    name = queue(driver, {'consumers_required': 1})
    reader, = subscribe(driver, name, 1)
    post_many(driver, name, size)
    update = driver.message_controller._consumer_update
    costs = []
    for removed in steps:
        # The oldest messages left are the next ``removed``.
        cursor = position(raw, name, removed - 1)
        update(name, PROJECT, reader, None, cursor, 0)
        update(name, PROJECT, reader, cursor, None, 0)
        done, wall, cpu = timed(raw, lambda: driver.clean_queue(name,
                                                                PROJECT))
        assert done == removed, (done, removed)
        costs.append((wall / removed, cpu / removed))
    return costs


def run(args):
    server = RedisServer().start()
    try:
        raw = redis_py.Redis.from_url(server.url, socket_timeout=300)
        driver = make_driver(server.url)
        report.post_ratio(args.posted, posting(driver, args))
        runs = resuming(raw, driver, args)
        medians = {label: [statistics.median(r[i] for r in run) * 1000
                           for i in (0, 1)] for label, run in runs.items()}
        print('resume a page of 10, median wall / Redis CPU ms: %s' % (
            ', '.join('%s %.2f / %.3f' % (label, wall, cpu)
                      for label, (wall, cpu) in medians.items())))
        (far, far_cpu), (head, head_cpu) = medians.values()
        print('ratio resume behind / at head: %.2fx wall, %.2fx Redis CPU '
              '(target <= 1.2)' % (far / head, far_cpu / head_cpu),
              flush=True)
        removed = args.removed
        cases = [(removed * 10, [removed]),
                 (removed * 100, [removed, removed * 5])]
        per = []
        for size, steps in cases:
            for step, (wall, cpu) in zip(steps, removal(raw, driver, size,
                                                        steps)):
                per.append((wall * 1e6, cpu * 1e6))
                print('read-by-all removal of %s from %s: %.1f / %.1f us '
                      'wall / Redis CPU per message' % (
                          format(step, ','), format(size, ','), *per[-1]),
                      flush=True)
        small, large, more = per
        print('ratios per removed message: queue 10x larger %.2fx wall / '
              '%.2fx CPU; 5x more removed %.2fx / %.2fx (O(removed): '
              'about 1)' % (large[0] / small[0], large[1] / small[1],
                            more[0] / large[0], more[1] / large[1]))
    finally:
        server.stop()


def main():
    run(report.sizes(__doc__, dict(posted=20000, consumers=100,
                                   behind=100000, resumes=300,
                                   removed=1000)))


if __name__ == '__main__':
    main()
