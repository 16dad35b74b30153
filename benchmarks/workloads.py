"""Workloads run the same way against any Zaqar data driver."""

import statistics
import time
import uuid

CLIENT = uuid.uuid4()
CLAIM = {'ttl': 300, 'grace': 60}


def _fresh_queue(driver, project, metadata=None):
    name = 'bench-' + uuid.uuid4().hex[:8]
    driver.queue_controller.create(name, metadata=metadata or {},
                                   project=project)
    return name


def post_throughput(driver, project, total, batch=10):
    """Messages per second, posted ``batch`` at a time."""
    queue = _fresh_queue(driver, project)
    messages = [{'ttl': 3600, 'body': {'n': n, 'pad': 'x' * 64}}
                for n in range(batch)]
    started = time.perf_counter()
    for _ in range(total // batch):
        driver.message_controller.post(queue, messages, CLIENT,
                                       project=project)
    return total / (time.perf_counter() - started)


def claim_delete_throughput(driver, project, total, limit=10):
    """Messages per second through claim (``limit`` at a time) + delete."""
    queue = _fresh_queue(driver, project)
    for _ in range(total // 10):
        driver.message_controller.post(
            queue, [{'ttl': 3600, 'body': n} for n in range(10)], CLIENT,
            project=project)
    done = 0
    started = time.perf_counter()
    while done < total:
        claim_id, messages = driver.claim_controller.create(
            queue, CLAIM, project=project, limit=limit)
        messages = list(messages)
        if not messages:
            break
        for message in messages:
            driver.message_controller.delete(queue, message['id'],
                                             project=project, claim=claim_id)
        done += len(messages)
    return done / (time.perf_counter() - started)


def claim_latency(driver, project, delayed_ahead, samples):
    """Median and p95 seconds of one claim (limit 1) of a ready message
    queued behind ``delayed_ahead`` delayed ones; each claimed message is
    deleted so the next claim finds the next ready one. Messages carry
    ``delay`` explicitly, as Zaqar's transport fills it in on delayed
    queues."""
    queue = _fresh_queue(driver, project, {'_default_message_delay': 900})
    for start in range(0, delayed_ahead, 100):
        driver.message_controller.post(
            queue, [{'ttl': 3600, 'body': n, 'delay': 900}
                    for n in range(min(100, delayed_ahead - start))],
            CLIENT, project=project)
    for _ in range(0, samples, 10):
        driver.message_controller.post(
            queue, [{'ttl': 3600, 'body': 'ready', 'delay': 0}] * 10,
            CLIENT, project=project)
    timings = []
    for _ in range(samples):
        started = time.perf_counter()
        claim_id, messages = driver.claim_controller.create(
            queue, CLAIM, project=project, limit=1)
        timings.append(time.perf_counter() - started)
        for message in messages:
            driver.message_controller.delete(queue, message['id'],
                                             project=project, claim=claim_id)
    timings.sort()
    return statistics.median(timings), timings[int(len(timings) * 0.95) - 1]
