"""Worker processes for the retention concurrency test (spawned).

Producers overflow a length-bounded queue, consumers claim and delete,
cleaners run the retention cleanup; each reports what it saw."""

import time
import uuid

from tests.redis import workers


def produce(redis_url, queue, project, count, groups, results):
    driver = workers.make_driver(redis_url)
    client, ids = uuid.uuid4(), []
    for start in range(0, count, 10):
        ids += driver.message_controller.post(
            queue, [{'ttl': 600, 'body': {'g': n % groups if groups else None,
                                          'n': n}}
                    for n in range(start, min(count, start + 10))],
            client, project=project)
    results.put(ids)


def consume(redis_url, queue, project, length, done, results):
    """Claim and delete until the producers are done and the queue stays
    empty. Checks as it goes: every claimed message is still there (get)
    while its claim lives, and no read shows more free messages than
    ``length``."""
    driver = workers.make_driver(redis_url)
    messages = driver.message_controller
    handouts, problems, idle = [], [], 0
    while idle < 20:
        claim_id, got = driver.claim_controller.create(
            queue, {'ttl': 60, 'grace': 0}, project=project, limit=5)
        got = list(got)
        if not got:
            idle = idle + 1 if done.is_set() else 0
            time.sleep(0.05)
            continue
        idle, now = 0, time.time()
        for message in got:
            handouts.append((message['id'], message.position,
                             message['body']['g'], now))
        found = {m['id'] for m in messages.bulk_get(
            queue, [m['id'] for m in got], project=project)}
        if found != {m['id'] for m in got}:
            problems.append(('claimed message gone', sorted(
                {m['id'] for m in got} - found)))
        pages = messages.list(queue, project=project, limit=1000, echo=True)
        free = len(list(next(pages)))
        if free > length:
            problems.append(('listed more than length', free))
        for message in got:
            messages.delete(queue, message['id'], project=project,
                            claim=claim_id)
    results.put((handouts, problems))


def clean(redis_url, queue, project, done, results):
    """Run the retention cleanup of the queue in small batches until the
    producers are done, then once more."""
    driver = workers.make_driver(redis_url)
    driver.conf.set_override('tuples_per_iteration', 7, group='retention')
    removed = 0
    while not done.is_set():
        removed += driver.clean_queue(queue, project)
        time.sleep(0.01)
    removed += driver.clean_queue(queue, project)
    results.put(removed)
