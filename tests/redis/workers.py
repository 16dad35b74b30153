"""Worker processes for the concurrency tests (spawned, not forked)."""

import time
import uuid


def make_driver(redis_url):
    from localstack import backends
    from zaqar_delay.drivers.redis import driver
    conf = backends.make_conf()
    conf.set_override('uri', redis_url.replace('redis://', 'delay.redis://'),
                      group='drivers:message_store:delay.redis')
    return driver.DataDriver(conf, None,
                             backends.control_driver(conf, redis_url))


def consume(redis_url, queue, project, abandon_every, claim_ttl, results):
    """Claim and delete until the queue stays empty; every ``abandon_every``
    th claim is left to expire instead, as a crashed consumer would."""
    driver = make_driver(redis_url)
    handouts, idle, claims = [], 0, 0
    while idle < 30:
        claim_id, messages = driver.claim_controller.create(
            queue, {'ttl': claim_ttl, 'grace': 0}, project=project, limit=7)
        messages = list(messages)
        if not messages:
            idle += 1
            time.sleep(0.1)
            continue
        idle = 0
        claims += 1
        now = time.time()
        for message in messages:
            handouts.append((message['id'], claim_id, now))
        if abandon_every and claims % abandon_every == 0:
            continue
        for message in messages:
            driver.message_controller.delete(queue, message['id'],
                                             project=project, claim=claim_id)
    results.put(handouts)


def produce(redis_url, queue, project, count, results):
    driver = make_driver(redis_url)
    ids = []
    client = uuid.uuid4()
    for start in range(0, count, 10):
        ids += driver.message_controller.post(
            queue, [{'ttl': 600, 'body': {'n': n}}
                    for n in range(start, min(count, start + 10))],
            client, project=project)
    results.put(ids)


def consume_groups(redis_url, queue, project, abandon_every, claim_ttl,
                   results):
    """Like ``consume``, recording for each hand-out the time before the
    claim was sent and after it returned, and for each delete the time
    before it was sent; abandoned claims are left to expire."""
    driver = make_driver(redis_url)
    handouts, acks, idle, claims = [], [], 0, 0
    while idle < 40:
        before = time.time()
        claim_id, messages = driver.claim_controller.create(
            queue, {'ttl': claim_ttl, 'grace': 0}, project=project, limit=5)
        after = time.time()
        messages = list(messages)
        if not messages:
            idle += 1
            time.sleep(0.05)
            continue
        idle = 0
        claims += 1
        abandon = abandon_every and claims % abandon_every == 0
        for message in messages:
            body = message['body']
            handouts.append((body['g'], body['n'], message['id'], before,
                             after, abandon))
        if abandon:
            continue
        for message in messages:
            acks.append((message['id'], time.time()))
            driver.message_controller.delete(queue, message['id'],
                                             project=project, claim=claim_id)
    results.put((handouts, acks))


def produce_groups(redis_url, queue, project, groups, per_group, results):
    """Post ``per_group`` messages to each group, interleaving groups."""
    driver = make_driver(redis_url)
    client = uuid.uuid4()
    for n in range(per_group):
        driver.message_controller.post(
            queue, [{'ttl': 600, 'body': {'g': g, 'n': n}}
                    for g in groups], client, project=project)
    results.put(len(groups) * per_group)
