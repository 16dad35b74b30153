"""Workloads run the same way against any Zaqar data driver."""

import statistics
import time
import uuid

CLIENT = uuid.uuid4()
CLAIM = {'ttl': 300, 'grace': 60}


def fresh_queue(driver, project, metadata=None):
    name = 'bench-' + uuid.uuid4().hex[:8]
    driver.queue_controller.create(name, metadata=metadata or {},
                                   project=project)
    return name


def post_throughput(driver, project, total, batch=10):
    """Messages per second, posted ``batch`` at a time."""
    queue = fresh_queue(driver, project)
    messages = [{'ttl': 3600, 'body': {'n': n, 'pad': 'x' * 64}}
                for n in range(batch)]
    started = time.perf_counter()
    for _ in range(total // batch):
        driver.message_controller.post(queue, messages, CLIENT,
                                       project=project)
    return total / (time.perf_counter() - started)


def claim_delete_throughput(driver, project, total, limit=10):
    """Messages per second through claim (``limit`` at a time) + delete."""
    queue = fresh_queue(driver, project)
    for _ in range(total // 10):
        driver.message_controller.post(
            queue, [{'ttl': 3600, 'body': n} for n in range(10)], CLIENT,
            project=project)
    started = time.perf_counter()
    done = drain(driver, project, queue, total, limit)
    return done / (time.perf_counter() - started)


def drain(driver, project, queue, total, limit=10, phase_done=None):
    """Claim (``limit`` at a time) and delete up to ``total`` messages;
    how many were. ``phase_done('claim' or 'delete')`` is called when
    each claim, then its deletes, returned."""
    done = 0
    phase_done = phase_done or (lambda phase: None)
    while done < total:
        claim_id, messages = driver.claim_controller.create(
            queue, CLAIM, project=project, limit=limit)
        messages = list(messages)
        phase_done('claim')
        if not messages:
            break
        for message in messages:
            driver.message_controller.delete(queue, message['id'],
                                             project=project, claim=claim_id)
        phase_done('delete')
        done += len(messages)
    return done


class CpuByPhase:
    """CPU seconds (``cpu_seconds()``) spent in each phase of drain()."""

    def __init__(self, cpu_seconds):
        self.cpu_seconds = cpu_seconds
        self.last = cpu_seconds()
        self.spent = {'claim': 0.0, 'delete': 0.0}

    def __call__(self, phase):
        now = self.cpu_seconds()
        self.spent[phase] += now - self.last
        self.last = now


def delayed_queue(driver, project, delayed_ahead, samples):
    """A delayed queue with ``delayed_ahead`` delayed messages, then
    ``samples`` ready ones. Messages carry ``delay`` explicitly, as Zaqar's
    transport fills it in on delayed queues."""
    queue = fresh_queue(driver, project, {'_default_message_delay': 900})
    for start in range(0, delayed_ahead, 100):
        driver.message_controller.post(
            queue, [{'ttl': 3600, 'body': n, 'delay': 900}
                    for n in range(min(100, delayed_ahead - start))],
            CLIENT, project=project)
    _post_ready(driver, queue, project, samples, delay=0)
    return queue


def grouped_queue(driver, project, groups, blocked_per_group, samples):
    """A grouped queue where ``groups`` groups have their head in flight
    and ``blocked_per_group`` messages each waiting behind it, then
    ``samples`` ready ungrouped messages."""
    queue = fresh_queue(driver, project, {'_message_group_key': 'g'})
    batch = []
    for g in range(groups):
        batch += [{'ttl': 3600, 'body': {'g': g, 'n': n}}
                  for n in range(1 + blocked_per_group)]
        if len(batch) >= 100:
            driver.message_controller.post(queue, batch, CLIENT,
                                           project=project)
            batch = []
    if batch:
        driver.message_controller.post(queue, batch, CLIENT, project=project)
    in_flight = 0
    while in_flight < groups:
        _, messages = driver.claim_controller.create(
            queue, {'ttl': 3600, 'grace': 60}, project=project, limit=100)
        in_flight += len(list(messages))
    _post_ready(driver, queue, project, samples)
    return queue


def _post_ready(driver, queue, project, count, **extra):
    ready = dict({'ttl': 3600, 'body': 'ready'}, **extra)
    for _ in range(0, count, 10):
        driver.message_controller.post(queue, [ready] * 10, CLIENT,
                                       project=project)


def claim_latencies(driver, project, queues, samples):
    """(median, p95) seconds of one claim (limit 1, then delete) on each of
    ``queues``, taking turns between them so that noise on a shared
    machine falls on all of them alike."""
    timings = {queue: [] for queue in queues}
    for _ in range(samples):
        for queue in queues:
            started = time.perf_counter()
            claim_id, messages = driver.claim_controller.create(
                queue, CLAIM, project=project, limit=1)
            timings[queue].append(time.perf_counter() - started)
            for message in messages:
                driver.message_controller.delete(
                    queue, message['id'], project=project, claim=claim_id)
    out = []
    for queue in queues:
        ordered = sorted(timings[queue])
        out.append((statistics.median(ordered),
                     ordered[int(len(ordered) * 0.95) - 1]))
    return out
