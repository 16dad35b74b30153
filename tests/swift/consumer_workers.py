"""Worker processes for the Swift persistent consumer concurrency tests
(spawned): each reports what it saw."""

import time
import uuid

from tests.swift.workers import make_driver

# A Client-ID that is no persistent consumer (plain listings).
WATCHER = uuid.UUID('cccccccc-cccc-4ccc-8ccc-cccccccccccc')


def update(swift_uri, redis_url, queue, project, consume_id, steps,
           results):
    """Apply (ack, handed) updates to one consumer, as racing pages do."""
    driver = make_driver(swift_uri, redis_url)
    for ack, handed in steps:
        driver.message_controller._consumer_update(
            queue, project, consume_id, ack, handed, 0)
    results.put(len(steps))


def read(swift_uri, redis_url, queue, project, consume_id, done, results):
    """Read the queue as persistent consumer ``consume_id``, a page at a
    time, acknowledging each page with the next listing, until the
    producers are done and the queue stays empty."""
    driver = make_driver(swift_uri, redis_url)
    client, marker, seen, idle = uuid.UUID(consume_id), None, [], 0
    while idle < 10:
        pages = driver.message_controller.list(
            queue, project=project, marker=marker, limit=10,
            client_uuid=client)
        page = list(next(pages))
        marker = next(pages)
        seen += [(m['id'], m.position) for m in page]
        if page:
            idle = 0
        else:
            idle = idle + 1 if done.is_set() else 0
            time.sleep(0.05)
    results.put((consume_id, seen))


def watch(swift_uri, redis_url, queue, project, done, results):
    """Plain listings: none may return a message at or before the lowest
    cursor of the consumers read just before it (cursors only move
    forward, so that is at most the read-by-all cut at listing time)."""
    driver = make_driver(swift_uri, redis_url)
    messages = driver.message_controller
    problems = []
    while not done.is_set():
        _, found = messages._consumers(queue, project)
        cursors = [c.cursor for c in found]
        cut = min(cursors) if len(found) == 2 and None not in cursors \
            else None
        pages = messages.list(queue, project=project, limit=20, echo=True,
                              client_uuid=WATCHER)
        for message in next(pages):
            if cut is not None and message.position <= cut:
                problems.append((message['id'], message.position, cut))
        time.sleep(0.05)
    results.put(problems)
