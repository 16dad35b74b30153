"""Producer and consumer processes of the fault-injection history test.

Each runs in its own process (spawned), builds its own data driver from a
``spec`` dict, records every call through :class:`history.Recorder` and
stops when the file ``spec['stop']`` exists. The queues (``spec['queues']``,
created by the test) are:

* ``delayed`` - ``_default_message_delay`` 1; messages also carry their own
  delay of 0-2 s or none;
* ``grouped`` - grouped by body key ``g`` (each producer has its own
  groups, so posting order is known) and delayed like ``delayed``;
* ``dead`` - ``_max_claim_count`` 2 into ``dlq``; consumers abandon many of
  its claims, so messages get dead-lettered;
* ``dlq`` - consumed like the others.
"""

import os
import random
import time
import uuid

from tests.faults import history

TTL = 600
CLAIM_TTL = 2
DEFAULT_DELAY = 1
GROUPS_PER_PRODUCER = 3
POST_QUEUES = ('delayed', 'grouped', 'dead')
CONSUME_QUEUES = ('delayed', 'grouped', 'dead', 'dlq')
# Share of claims left to expire, as a consumer that crashed would.
ABANDON = {'dead': 0.45}
ABANDON_OTHERS = 0.1


def make_driver(spec):
    """The data driver ``spec`` describes, metadata in Zaqar's Redis
    control driver (as localstack/factories do)."""
    from localstack import backends
    conf = backends.make_conf()
    if spec['backend'] == 'redis':
        from zaqar_delay.drivers.redis import driver
        group = 'drivers:message_store:delay.redis'
    else:
        from zaqar_delay.drivers.swift import driver
        group = 'drivers:message_store:delay.swift'
    conf.set_override('uri', spec['uri'], group=group)
    for name, value in spec.get('options', {}).items():
        conf.set_override(name, value, group=group)
    return driver.DataDriver(conf, None,
                             backends.control_driver(conf, spec['control']))


def _stopped(spec):
    return os.path.exists(spec['stop'])


def produce(spec, index, log_path, seed):
    driver = make_driver(spec)
    recorder = history.Recorder(log_path, 'producer-%d' % index)
    rand = random.Random(seed)
    client, seq = uuid.uuid4(), 0
    next_n = {}
    while not _stopped(spec):
        kind = rand.choice(POST_QUEUES)
        queue = spec['queues'][kind]
        messages, tags = [], []
        for _ in range(rand.randint(1, 4)):
            seq += 1
            tag = 'p%d-%d' % (index, seq)
            body, info = {'t': tag}, {'t': tag, 'q': queue, 'd': 0}
            message = {'ttl': TTL, 'body': body}
            if kind in ('delayed', 'grouped'):
                delay = rand.choice([None, 0, 1, 2])
                if delay is not None:
                    message['delay'] = delay
                info['d'] = DEFAULT_DELAY if delay is None else delay
            if kind == 'grouped':
                group = 'p%d-g%d' % (index, rand.randrange(
                    GROUPS_PER_PRODUCER))
                next_n[group] = next_n.get(group, 0) + 1
                body.update(g=group, n=next_n[group])
                info.update(g=group, n=next_n[group])
            messages.append(message)
            tags.append(info)
        outcome, ids, record = recorder.call(
            'post', queue, lambda: driver.message_controller.post(
                queue, messages, client, project=spec['project']),
            msgs=tags)
        if outcome == 'ok':
            record['ids'] = ids
        recorder.write(record)
        time.sleep(spec.get('post_pause', 0.01))
    recorder.close()


def consume(spec, index, mode, log_path, seed):
    """``mode`` 'claim' (claim, then delete or abandon) or 'pop'."""
    driver = make_driver(spec)
    recorder = history.Recorder(log_path, '%s-%d' % (mode, index))
    rand = random.Random(seed)
    while not _stopped(spec):
        queue = spec['queues'][rand.choice(CONSUME_QUEUES)]
        if mode == 'pop':
            got = pop(driver, recorder, spec, queue, rand.randint(1, 3))
        else:
            got = claim_and_delete(driver, recorder, spec, queue,
                                   rand.randint(1, 5), CLAIM_TTL, rand)
        if not got:
            time.sleep(spec.get('idle_pause', 0.02))
    recorder.close()


def pop(driver, recorder, spec, queue, limit):
    _, messages, record = recorder.call(
        'pop', queue, lambda: list(driver.message_controller.pop(
            queue, limit, project=spec['project'])))
    record['msgs'] = [{'id': m['id'], 't': m['body']['t']}
                      for m in messages or ()]
    recorder.write(record)
    return bool(messages)


def claim_and_delete(driver, recorder, spec, queue, limit, ttl, rand=None):
    """Claim up to ``limit``; delete each message under the claim, unless
    ``rand`` decides to abandon the claim. Returns how many were claimed."""
    def claim():
        claim_id, found = driver.claim_controller.create(
            queue, {'ttl': ttl, 'grace': 0}, project=spec['project'],
            limit=limit)
        return claim_id, list(found)

    _, result, record = recorder.call('claim', queue, claim, ttl=ttl)
    claim_id, messages = result if result else (None, [])
    record['claim'] = claim_id
    record['msgs'] = [{'id': m['id'], 't': m['body']['t']}
                      for m in messages]
    recorder.write(record)
    abandon = ABANDON.get(_kind(spec, queue), ABANDON_OTHERS)
    if rand is not None and rand.random() < abandon:
        return len(messages)
    for message in messages:
        _, _, record = recorder.call(
            'delete', queue, lambda: driver.message_controller.delete(
                queue, message['id'], project=spec['project'],
                claim=claim_id),
            id=message['id'], tag=message['body']['t'], claim=claim_id)
        recorder.write(record)
    return len(messages)


def _kind(spec, queue):
    return next(kind for kind, name in spec['queues'].items()
                if name == queue)
