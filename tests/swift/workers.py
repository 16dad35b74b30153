"""Worker processes for the Swift concurrency tests (spawned, not forked)."""

import time
import uuid

# At most this long (s) per consumer: slow on a loaded machine, never hung.
CONSUME_FOR_S = 540


def make_driver(swift_uri, redis_url):
    from localstack import backends
    from zaqar_delay.drivers.swift import driver
    conf = backends.make_conf()
    conf.set_override('uri', swift_uri,
                      group='drivers:message_store:delay.swift')
    return driver.DataDriver(conf, None,
                             backends.control_driver(conf, redis_url))


def consume(swift_uri, redis_url, queue, project, abandon_every, claim_ttl,
            start, posted_all, results):
    """Claim and delete until every producer is done (``posted_all`` is
    set) and the queue holds nothing; every ``abandon_every``-th claim is
    left to expire, as a crashed consumer's. Records (id, claim id, claim
    count, claim sent at, claim returned at) per message handed out.

    An empty claim alone means little on a loaded machine: a producer may
    not have started, and a claim that outlasts its ttl's safety margin
    hands its messages back and returns none (claims.py). So the
    consumer stops only after empty claims on a queue whose stats count
    nothing (abandoned claims' messages are counted until deleted)."""
    driver = make_driver(swift_uri, redis_url)
    while time.time() < start:
        time.sleep(0.005)
    handouts, idle, claims = [], 0, 0
    # A message counted but never claimable must fail the test, not hang it.
    while idle < 3 and time.time() < start + CONSUME_FOR_S:
        began = time.time()
        claim_id, messages = driver.claim_controller.create(
            queue, {'ttl': claim_ttl, 'grace': 0}, project=project, limit=5)
        messages = list(messages)
        if not messages:
            empty = posted_all.is_set() and not (
                driver.message_controller.stats(queue, project)['messages']['total'])
            idle = idle + 1 if empty else 0
            time.sleep(0.1)
            continue
        idle = 0
        claims += 1
        now = time.time()
        handouts += [(m['id'], claim_id, m['claim_count'], began, now)
                     for m in messages]
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
