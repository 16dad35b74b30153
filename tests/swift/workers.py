"""Worker processes for the Swift concurrency tests (spawned, not forked)."""

import time
import uuid


def make_driver(swift_uri, redis_url):
    from tests import backends
    from zaqar_delay.drivers.swift import driver
    conf = backends.make_conf()
    conf.set_override('uri', swift_uri,
                      group='drivers:message_store:delay.swift')
    return driver.DataDriver(conf, None,
                             backends.control_driver(conf, redis_url))


def consume(swift_uri, redis_url, queue, project, abandon_every, claim_ttl,
            start, results):
    """Claim and delete until the queue stays empty; every
    ``abandon_every``-th claim is left to expire, as a crashed consumer's."""
    driver = make_driver(swift_uri, redis_url)
    while time.time() < start:
        time.sleep(0.005)
    handouts, idle, claims = [], 0, 0
    while idle < 25:
        began = time.time()
        claim_id, messages = driver.claim_controller.create(
            queue, {'ttl': claim_ttl, 'grace': 0}, project=project, limit=5)
        messages = list(messages)
        if not messages:
            idle += 1
            time.sleep(0.1)
            continue
        idle = 0
        claims += 1
        now = time.time()
        handouts += [(m['id'], claim_id, began, now) for m in messages]
        if abandon_every and claims % abandon_every == 0:
            continue
        for message in messages:
            try:
                driver.message_controller.delete(
                    queue, message['id'], project=project, claim=claim_id)
            except Exception:
                # Reported through the hand-outs: a message whose claim
                # was lost shows up twice there.
                pass
    results.put(handouts)


def produce(swift_uri, redis_url, queue, project, count, start, results):
    driver = make_driver(swift_uri, redis_url)
    while time.time() < start:
        time.sleep(0.005)
    ids, client = [], uuid.uuid4()
    for first in range(0, count, 10):
        ids += driver.message_controller.post(
            queue, [{'ttl': 600, 'body': {'n': n}}
                    for n in range(first, min(count, first + 10))],
            client, project=project)
    results.put(ids)


def produce_grouped(swift_uri, redis_url, queue, project, producer, groups,
                    rounds, start, results):
    """Post ``rounds`` batches, each with the next member of every group
    in ``groups`` (body ``{'g': group, 'n': sequence, 'p': producer}``)."""
    driver = make_driver(swift_uri, redis_url)
    while time.time() < start:
        time.sleep(0.005)
    ids, client = [], uuid.uuid4()
    for n in range(rounds):
        ids += driver.message_controller.post(
            queue, [{'ttl': 600, 'body': {'g': g, 'n': n, 'p': producer}}
                    for g in groups],
            client, project=project)
    results.put(ids)


def consume_grouped(swift_uri, redis_url, queue, project, start, results):
    """Claim and delete until the queue stays empty, recording for each
    message handed out (group, (producer, sequence), id, claim returned
    at, delete sent at)."""
    driver = make_driver(swift_uri, redis_url)
    while time.time() < start:
        time.sleep(0.005)
    handouts, idle = [], 0
    while idle < 25:
        claim_id, messages = driver.claim_controller.create(
            queue, {'ttl': 60, 'grace': 0}, project=project, limit=3)
        returned = time.time()
        messages = list(messages)
        if not messages:
            idle += 1
            time.sleep(0.1)
            continue
        idle = 0
        for message in messages:
            sent = time.time()
            driver.message_controller.delete(
                queue, message['id'], project=project, claim=claim_id)
            body = message['body']
            handouts.append((body['g'], (body['p'], body['n']),
                             message['id'], returned, sent))
    results.put(handouts)
