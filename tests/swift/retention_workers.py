"""Worker processes for the Swift retention concurrency test (spawned)."""

import time
import uuid

from tests.swift.workers import make_driver


def wait(start):
    while time.time() < start:
        time.sleep(0.005)


def produce(swift_uri, redis_url, queue, project, count, start, results):
    """Post ``count`` messages in tens; report (id, time the post
    returned), in posting order."""
    driver = make_driver(swift_uri, redis_url)
    wait(start)
    posted, client = [], uuid.uuid4()
    for first in range(0, count, 10):
        ids = driver.message_controller.post(
            queue, [{'ttl': 600, 'body': {'n': n}}
                    for n in range(first, min(count, first + 10))],
            client, project=project)
        now = time.time()
        posted += [(mid, now) for mid in ids]
    results.put(posted)


def consume(swift_uri, redis_url, queue, project, start, results):
    """Claim and delete until the queue stays empty. Reports every
    hand-out (id, began, ended) and the ids that were gone before their
    claim was deleted (a claimed message that retention removed)."""
    from zaqar.storage import errors
    driver = make_driver(swift_uri, redis_url)
    wait(start)
    handouts, lost, idle = [], [], 0
    while idle < 30:
        began = time.time()
        claim_id, messages = driver.claim_controller.create(
            queue, {'ttl': 60, 'grace': 0}, project=project, limit=3)
        messages = list(messages)
        ended = time.time()
        if not messages:
            idle += 1
            time.sleep(0.1)
            continue
        idle = 0
        handouts += [(m['id'], began, ended) for m in messages]
        for message in messages:
            try:
                driver.message_controller.get(queue, message['id'],
                                              project=project)
            except errors.MessageDoesNotExist:
                lost.append(message['id'])
            driver.message_controller.delete(
                queue, message['id'], project=project, claim=claim_id)
    results.put((handouts, lost))


def clean(swift_uri, redis_url, queue, project, start, stop, results):
    """Run the cleanup of one queue until told to stop; report how many
    removals this process's passes answered, and how many passes failed.
    A pass that fails on a Swift error is tried again, as zaqar-delay-gc
    does (cmd/gc.py); what it removed before failing goes unreported."""
    from zaqar.storage import errors
    driver = make_driver(swift_uri, redis_url)
    wait(start)
    removed = failed = 0
    while not stop.is_set():
        try:
            removed += driver.clean_queue(queue, project)
        except errors.ExceptionBase as exc:
            print('clean pass failed, trying again:', exc, flush=True)
            failed += 1
            time.sleep(0.5)
        time.sleep(0.02)
    results.put((removed, failed))
