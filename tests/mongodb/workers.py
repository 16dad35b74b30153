"""Workers for the MongoDB-only races (a group's concurrent advances,
posts racing a persistent consumer past the post horizon): threads on
mongomock (one process holds the fake server), spawned processes on a
real server. The multi-process suite of every backend is
tests/multiprocess."""

import queue as queue_module
import shutil
import tempfile
import threading
import time
import uuid

from localstack import backends
from tests import crew as crew_module

GROUP = 'drivers:message_store:delay.mongodb'


def real_driver(uri, database, redis_url):
    from zaqar_delay.drivers.mongodb import driver
    conf = backends.make_conf()
    conf.set_override('uri', uri, group=GROUP)
    conf.set_override('database', database, group=GROUP)
    return driver.DataDriver(conf, None,
                             backends.control_driver(conf, redis_url))


def produce(driver, queue, project, count):
    client = uuid.uuid4()
    ids = []
    for start in range(0, count, 5):
        ids += driver.message_controller.post(
            queue, [{'ttl': 600, 'body': {'n': n}}
                    for n in range(start, min(count, start + 5))],
            client, project=project)
    return ids


def produce_retried(driver, queue, project, count):
    """As :func:`produce`, each post's store call run twice at once (a
    post and its retry after a lost reply, racing); the ids posted."""
    from zaqar_delay import rules
    controller = driver.message_controller
    policy = controller.policy(queue, project)
    client = str(uuid.uuid4())
    ids = []
    for start in range(0, count, 5):
        messages = rules.prepare_messages(
            [{'ttl': 600, 'body': {'n': n}}
             for n in range(start, min(count, start + 5))], policy, 0, 1209600)
        racing = [threading.Thread(target=controller._insert,
                                   args=(queue, project, messages, client))
                  for _ in range(2)]
        for thread in racing:
            thread.start()
        for thread in racing:
            thread.join()
        ids += [message.id for message in messages]
    return ids


def produce_grouped(driver, queue, project, groups, per_group):
    """Post ``per_group`` messages to each of ``groups``, interleaved, in
    batches of 7; returns the ids in posting order."""
    bodies = [{'g': group, 'n': n} for n in range(per_group)
              for group in groups]
    ids = []
    for start in range(0, len(bodies), 7):
        ids += driver.message_controller.post(
            queue, [{'ttl': 600, 'body': body}
                    for body in bodies[start:start + 7]],
            uuid.uuid4(), project=project)
    return ids


def consume_grouped(driver, queue, project, idle_rounds=5):
    """Claim, then acknowledge (delete), until the queue stays empty.

    Returns (group, n, message id, got, done) per message: ``got`` is
    taken after the claim returned, ``done`` before the delete is sent,
    both on the host's monotonic clock (shared by processes), so
    [got, done] lies inside the time the message was really in flight.
    """
    out, idle = [], 0
    while idle < idle_rounds:
        claim_id, messages = driver.claim_controller.create(
            queue, {'ttl': 300, 'grace': 0}, project=project, limit=4)
        got = time.monotonic()
        messages = list(messages)
        if not messages:
            idle += 1
            time.sleep(0.001)
            continue
        idle = 0
        for message in messages:
            done = time.monotonic()
            out.append((message['body']['g'], message['body']['n'],
                        message['id'], got, done))
            driver.message_controller.delete(
                queue, message['id'], project=project, claim=claim_id)
    return out


def consume_sticky(driver, queue, project, client, idle_rounds=5):
    """consume_grouped as ``client`` (sticky.acting_as); each record
    gains the client."""
    from zaqar_delay import sticky
    with sticky.acting_as(client):
        return [record + (client,) for record in consume_grouped(
            driver, queue, project, idle_rounds)]


def read_feed(driver, queue, project, consume_id, total, rounds=20000,
              limit=5, all_stored=False):
    """List as persistent consumer ``consume_id``, ``limit`` at a time,
    acknowledging each page with the next listing, until ``total``
    messages were handed to it, then acknowledge the last page; the ids
    in the order got. ``all_stored``: also stop at an empty page read
    after the queue held ``total`` messages (nothing removes any), as
    what it skipped never comes."""
    got, marker, stored = [], None, False
    for _ in range(rounds):
        pages = driver.message_controller.list(
            queue, project=project, marker=marker, limit=limit,
            client_uuid=consume_id)
        page = list(next(pages))
        marker = next(pages)
        got += [message['id'] for message in page]
        if len(got) >= total or (stored and not page):
            break
        if not page:
            stored = all_stored and driver.message_controller.stats(
                queue, project)['messages']['total'] >= total
            time.sleep(0.001)
    next(driver.message_controller.list(queue, project=project,
                                        marker=marker, limit=1,
                                        client_uuid=consume_id))
    return got


def advance_group(driver, queue, project, group):
    """Advance one group (a headless one, in the test); the head's id."""
    from zaqar_delay.drivers.mongodb import groups
    head = groups.advance(driver, queue, project, group, driver.now())
    return head and head['_id']


def _in_process(index, role, uri, database, redis_url, args, results):
    driver = real_driver(uri, database, redis_url)
    try:
        results.put((index, globals()[role](driver, *args)))
    except Exception as exc:  # reported by the test, not lost
        results.put((index, RuntimeError(repr(exc))))
    driver.close()


def run_all(role, workers, shared_driver, args, real=None):
    """Run ``role(driver, *args)`` ``workers`` times at once; results.

    ``real`` = (uri, database, redis_url) runs spawned processes, each
    with its own driver; otherwise threads share ``shared_driver``.
    """
    return run_mixed([(role, args)] * workers, shared_driver, real)


def run_mixed(jobs, shared_driver, real=None):
    """Run every ``(role, args)`` of ``jobs`` at once; their results, in
    the order of ``jobs``. Processes or threads as in :func:`run_all`."""
    if real:
        return _run_spawned(jobs, real)
    results = queue_module.Queue()
    # Build the shared driver's collections and indexes before the
    # threads race to do it (its lazy properties are not guarded).
    shared_driver.message_controller
    shared_driver.claim_controller

    def work(index, role, args):
        try:
            results.put((index, globals()[role](shared_driver, *args)))
        except Exception as exc:  # reported by the test, not lost
            results.put((index, exc))

    procs = [threading.Thread(target=work, args=(index, role, args))
             for index, (role, args) in enumerate(jobs)]
    for proc in procs:
        proc.start()
    out = dict(results.get(timeout=120) for _ in procs)
    for proc in procs:
        proc.join(30)
    return _in_order(out, len(jobs))


def _run_spawned(jobs, real):
    # A worker that dies without a result fails the run at once, with its
    # stderr, instead of after the whole wait.
    log_dir = tempfile.mkdtemp(prefix='zd-mongodb-workers-')
    crew = crew_module.Crew(log_dir)
    try:
        results = crew.Queue()
        for index, (role, args) in enumerate(jobs):
            crew.spawn(_in_process, index, role, *real, args, results)
        out = dict(crew.get(results, timeout=120) for _ in jobs)
        crew.join(30)
    finally:
        crew.stop()
        shutil.rmtree(log_dir, ignore_errors=True)
    return _in_order(out, len(jobs))


def _in_order(out, count):
    for result in out.values():
        if isinstance(result, Exception):
            raise result
    return [out[index] for index in range(count)]
