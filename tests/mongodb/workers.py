"""Workers for the concurrency tests: threads on mongomock (one process
holds the fake server), spawned processes on a real server."""

import multiprocessing
import queue as queue_module
import threading
import uuid

from tests import backends

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


def consume(driver, queue, project, idle_rounds=3):
    """Claim until the queue stays empty; return (message id, claim id)."""
    got, idle = [], 0
    while idle < idle_rounds:
        claim_id, messages = driver.claim_controller.create(
            queue, {'ttl': 300, 'grace': 0}, project=project, limit=3)
        messages = list(messages)
        if not messages:
            idle += 1
            continue
        idle = 0
        got += [(message['id'], claim_id) for message in messages]
    return got


def _in_process(role, uri, database, redis_url, args, results):
    driver = real_driver(uri, database, redis_url)
    results.put(globals()[role](driver, *args))
    driver.close()


def run_all(role, workers, shared_driver, args, real=None):
    """Run ``role(driver, *args)`` ``workers`` times at once; results.

    ``real`` = (uri, database, redis_url) runs spawned processes, each
    with its own driver; otherwise threads share ``shared_driver``.
    """
    if real:
        context = multiprocessing.get_context('spawn')
        results = context.Queue()
        procs = [context.Process(target=_in_process,
                                 args=(role, *real, args, results))
                 for _ in range(workers)]
    else:
        results = queue_module.Queue()

        def work():
            try:
                results.put(globals()[role](shared_driver, *args))
            except Exception as exc:  # reported by the test, not lost
                results.put(exc)

        procs = [threading.Thread(target=work) for _ in range(workers)]
    for proc in procs:
        proc.start()
    out = [results.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(30)
    for result in out:
        if isinstance(result, Exception):
            raise result
    return out
