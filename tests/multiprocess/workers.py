"""The roles of the multi-process tests, written once against the storage
API. Each runs as ``role(driver, *args)`` (team.py) and puts what it saw
on its ``results`` queue; the tests check it."""

import collections
import dataclasses
import time
import uuid

from zaqar.storage import errors as storage_errors

from tests.multiprocess import probes

TTL = 600
# A Client-ID that is no persistent consumer (plain listings).
WATCHER = uuid.UUID('cccccccc-cccc-4ccc-8ccc-cccccccccccc')

# Times are on the host's monotonic clock, which every process shares.
# One message handed out: ``began`` before the claim was sent, ``ended``
# after it returned; unless the claim was abandoned, ``ack_sent`` before
# its delete was sent, ``ack_done`` after it returned, ``ack_error`` what
# it raised (a claim that expired first).
Handout = collections.namedtuple('Handout', (
    'id', 'body', 'position', 'claim_id', 'claim_count', 'began', 'ended',
    'abandoned', 'ack_sent', 'ack_done', 'ack_error'))


@dataclasses.dataclass
class Plan:
    """How a consumer claims and when it stops: after ``idle_rounds``
    empty claims in a row once the producers are done (and, with
    ``until_empty``, the stats then count nothing: an abandoned claim's
    messages count until deleted), or after ``give_up_s``; ``pause``
    seconds after each empty claim. Every ``abandon_every``-th claim is
    left to expire, as a crashed consumer's would. With
    ``read_claimed``, checks that each claimed message can be read while
    claimed; with ``length``, that a listing then shows no more than
    ``length`` free messages; with ``check_floor`` (MongoDB), that no
    claim returns a message below the queue's length floor read before
    it began (one that had already fallen out)."""
    limit: int = 5
    claim_ttl: int = 60
    abandon_every: int = 0
    idle_rounds: int = 3
    pause: float = 0.05
    until_empty: bool = True
    read_claimed: bool = False
    length: int = None
    check_floor: bool = False
    give_up_s: float = 540


def post_all(driver, queue, project, bodies, batch):
    """Post ``bodies`` ``batch`` at a time as one client; (id, time the
    post returned) per message, in posting order."""
    client, posted = uuid.uuid4(), []
    for first in range(0, len(bodies), batch):
        ids = driver.message_controller.post(
            queue, [{'ttl': TTL, 'body': body}
                    for body in bodies[first:first + batch]],
            client, project=project)
        now = time.monotonic()
        posted += [(mid, now) for mid in ids]
    return posted


def bodies_of(producer, count, groups=()):
    """Bodies {'p': producer, 'n': n}, with ``'g'`` the groups in turn."""
    return [dict({'p': producer, 'n': n},
                 **({'g': groups[n % len(groups)]} if groups else {}))
            for n in range(count)]


def produce(driver, queue, project, producer, count, batch, groups,
            results):
    results.put(post_all(driver, queue, project,
                         bodies_of(producer, count, groups), batch))


def consume(driver, queue, project, plan, posted_all, results):
    """Claim and delete as ``plan`` says; puts (hand-outs, problems)."""
    messages = driver.message_controller
    deadline = time.monotonic() + plan.give_up_s
    handouts, problems, idle, claims = [], [], 0, 0
    while idle < plan.idle_rounds and time.monotonic() < deadline:
        floor = (probes.length_floor(driver, queue, project)
                 if plan.check_floor else None)
        began = time.monotonic()
        claim_id, got = driver.claim_controller.create(
            queue, {'ttl': plan.claim_ttl, 'grace': 0}, project=project,
            limit=plan.limit)
        got = list(got)
        ended = time.monotonic()
        if not got:
            idle = idle + 1 if posted_all.is_set() else 0
            # Stats only once a run of empty claims would end the loop:
            # on Swift they list the queue, and a grouped queue answers
            # many empty claims while other consumers hold its groups.
            if idle >= plan.idle_rounds and plan.until_empty and (
                    messages.stats(queue, project)['messages']['total']):
                idle = 0
            time.sleep(plan.pause)
            continue
        idle, claims = 0, claims + 1
        abandoned = bool(plan.abandon_every
                         and claims % plan.abandon_every == 0)
        if floor is not None:
            problems += [('fell out before its claim began', m['id'],
                          m.position, floor)
                         for m in got if m.position < floor]
        if plan.read_claimed:
            problems += read_while_claimed(driver, queue, project, got,
                                           plan.length)
        for message in got:
            sent = done = error = None
            if not abandoned:
                sent = time.monotonic()
                try:
                    messages.delete(queue, message['id'], project=project,
                                    claim=claim_id)
                except storage_errors.ExceptionBase as exc:
                    error = repr(exc)
                done = time.monotonic()
            handouts.append(Handout(
                message['id'], message['body'], message.position, claim_id,
                message['claim_count'], began, ended, abandoned, sent, done,
                error))
    results.put((handouts, problems))


def read_while_claimed(driver, queue, project, got, length):
    """Problems seen reading claimed messages ``got``: one that is gone
    (to a bulk read or to a read of it alone), or a listing of more free
    messages than ``length`` (when given)."""
    messages, problems = driver.message_controller, []
    ids = {m['id'] for m in got}
    found = {m['id'] for m in messages.bulk_get(queue, ids, project=project)}
    for mid in sorted(ids):
        try:
            messages.get(queue, mid, project=project)
        except storage_errors.MessageDoesNotExist:
            found.discard(mid)
    if found != ids:
        problems.append(('claimed message gone', sorted(ids - found)))
    if length is None:
        return problems
    pages = messages.list(queue, project=project, limit=1000, echo=True)
    free = len(list(next(pages)))
    if free > length:
        problems.append(('listed more than length', free))
    return problems


def clean(driver, queue, project, batch, retry, stop, results):
    """Run the retention cleanup of the queue (``clean_queue``, ``batch``
    messages a step when given) until ``stop`` is set, then once more;
    puts (removed, failed passes). With ``retry`` a pass that fails on a
    store error is tried again, as zaqar-delay-gc does (what it removed
    before failing goes unreported); otherwise it fails the worker."""
    if batch:
        driver.conf.set_override('tuples_per_iteration', batch,
                                 group='retention')
    removed = failed = 0
    while True:
        last = stop.is_set()
        try:
            removed += driver.clean_queue(queue, project)
        except storage_errors.ExceptionBase as exc:
            if not retry:
                raise
            print('clean pass failed, trying again:', exc, flush=True)
            failed, last = failed + 1, False
            time.sleep(0.5)
        if last:
            break
        time.sleep(0.01)
    results.put((removed, failed))


def update_consumer(driver, queue, project, consume_id, steps, results):
    """Apply (ack, handed) updates to one consumer, as racing pages do,
    each adding one lost; puts how many were sent."""
    for ack, handed in steps:
        driver.message_controller._consumer_update(
            queue, project, consume_id, ack, handed, 1)
    results.put(len(steps))


def read(driver, queue, project, consume_id, limit, idle_rounds, posted_all,
         results):
    """Read the queue as persistent consumer ``consume_id``, ``limit`` at
    a time, acknowledging each page with the next listing, until the
    producers are done and ``idle_rounds`` pages in a row are empty (the
    first of them acknowledges the last page); puts (consume_id, [(id,
    position)] in the order read)."""
    client, marker, seen, idle = uuid.UUID(consume_id), None, [], 0
    while idle < idle_rounds:
        pages = driver.message_controller.list(
            queue, project=project, marker=marker, limit=limit,
            client_uuid=client)
        page = list(next(pages))
        marker = next(pages)
        seen += [(m['id'], m.position) for m in page]
        if page:
            idle = 0
        else:
            idle = idle + 1 if posted_all.is_set() else 0
            time.sleep(0.05)
    results.put((consume_id, seen))


def watch(driver, queue, project, consumers, pause, stop, results):
    """Plain listings until ``stop``: none may return a message at or
    before the lowest cursor of the ``consumers`` consumers, read just
    before it (cursors only move forward, so that is at most the
    read-by-all cut at listing time). Puts the problems seen."""
    messages, problems = driver.message_controller, []
    while not stop.is_set():
        _, found = messages._consumers(queue, project)
        if len(found) != consumers:
            problems.append(('consumers found', len(found)))
        cursors = [c.cursor for c in found]
        cut = min(cursors) if found and None not in cursors else None
        pages = messages.list(queue, project=project, limit=20, echo=True,
                              client_uuid=WATCHER)
        for message in next(pages):
            if cut is not None and message.position <= cut:
                problems.append((message['id'], message.position, cut))
        time.sleep(pause)
    results.put(problems)


def move_when_free(driver, queue, project, group, target, results,
                   tries=2000):
    """Move ``group`` to ``target`` once its head is not claimed; puts the
    number moved (None if it never got the chance)."""
    from zaqar_delay import errors
    for _ in range(tries):
        try:
            results.put(driver.message_controller.move_group(
                queue, group, target, project=project))
            return
        except errors.GroupInFlight:
            time.sleep(0.0005)
    results.put(None)
