"""The worker against a live zaqar-server on our Redis driver."""

import asyncio
import dataclasses
import pathlib
import re
import threading
import time

import pytest

from tests.worker.helpers import make_app
from tests.worker.helpers import wait_for
from zaqar_delay.worker import current_event
from zaqar_delay.worker import event_context

pytestmark = pytest.mark.integration


@dataclasses.dataclass
class PaymentCheck:
    order: int


@dataclasses.dataclass
class Refund:
    order: int


@pytest.fixture
def app(zaqar_url, project):
    made = make_app(zaqar_url, project)
    yield made
    made.close(5)


def test_delayed_event_is_handled_once_when_due_with_its_context(app):
    seen = []

    def check(event):
        seen.append((time.time(), event, dict(event_context()),
                     current_event().type))

    app.add_handler(PaymentCheck, check, parallelism=2)
    app.start()
    enqueued = time.time()
    app.enqueue(PaymentCheck(order=7), delay=2, context={'trace': 'ab1'})
    time.sleep(1.5)
    assert seen == []          # not before it is due
    assert wait_for(lambda: seen, 10)
    time.sleep(1.5)            # several more polls: still once
    [(handled_at, event, context, type_name)] = seen
    assert handled_at >= enqueued + 2
    assert event == PaymentCheck(order=7)
    assert (context, type_name) == ({'trace': 'ab1'}, 'PaymentCheck')
    stats = app.connection.stats('t-PaymentCheck')
    assert stats['total'] == 0     # acknowledged: deleted
    assert app.counts.snapshot('PaymentCheck') == {'enqueued': 1,
                                                   'handled': 1}


def test_failing_handler_is_retried_then_dead_lettered_then_redriven(app):
    attempts = []
    fixed = threading.Event()

    def flaky(event):
        attempts.append((time.monotonic(), dict(event_context())))
        if fixed.is_set():
            return None
        raise RuntimeError('payment service down')

    app.add_handler('Charge', flaky, max_attempts=3, retry_delay=1)
    app.start()
    [message_id] = app.enqueue_many([{'amount': 5}], type='Charge',
                                    context={'user': 'u1'})
    assert wait_for(lambda: app.dead_letters('Charge'), 20)
    time.sleep(1.5)
    assert len(attempts) == 3          # exactly _max_claim_count attempts
    gaps = [b[0] - a[0] for a, b in zip(attempts, attempts[1:])]
    assert all(gap >= 0.9 for gap in gaps), gaps   # the redelivery delay
    [letter] = app.dead_letters('Charge')
    assert (letter.id, letter.type, letter.data, letter.context,
            letter.attempts) == (message_id, 'Charge', {'amount': 5},
                                 {'user': 'u1'}, 3)
    assert app.connection.stats('t-Charge')['total'] == 0

    fixed.set()
    assert app.redrive('Charge') == 1
    assert wait_for(lambda: len(attempts) == 4, 10)
    assert attempts[-1][1] == {'user': 'u1'}
    assert wait_for(lambda: app.counts.snapshot('Charge').get('handled'), 5)
    assert app.dead_letters('Charge') == []
    assert app.counts.snapshot('Charge') == {
        'enqueued': 1, 'failed': 3, 'retried': 2, 'dead_lettered': 1,
        'handled': 1}


def test_false_fails_and_redrive_by_id_moves_only_that_one(app):
    calls = []

    def refuse(event):
        calls.append(event['n'])
        return False

    app.add_handler('Refused', refuse, max_attempts=1)
    app.start()
    ids = app.enqueue_many([{'n': 1}, {'n': 2}], type='Refused')
    assert wait_for(lambda: len(app.dead_letters('Refused')) == 2, 20)
    app.remove_handler('Refused')
    assert sorted(calls) == [1, 2]
    assert app.redrive('Refused', ids=[ids[1]]) == 1
    assert [d.data for d in app.dead_letters('Refused')] == [{'n': 1}]
    assert app.connection.stats('t-Refused')['total'] == 1
    assert app.redrive('Refused', ids=[ids[1]]) == 0   # already moved


def test_async_enqueue_and_coroutine_handlers(app):
    seen = []

    async def handle(event):
        await asyncio.sleep(0)
        seen.append((event, dict(event_context())))

    app.add_handler('Async', handle)
    app.start()

    async def produce():
        await app.enqueue_async({'a': 1}, type='Async', context={'c': 2})
        return await app.enqueue_many_async([{'a': 2}], type='Async')

    asyncio.run(produce())
    assert wait_for(lambda: len(seen) == 2, 10)
    assert sorted(seen, key=str) == [({'a': 1}, {'c': 2}), ({'a': 2}, {})]


def test_a_long_handler_keeps_its_claim_renewed(zaqar_url, project):
    # A free slot and a long poll interval: the idle claim loop must still
    # wake up to renew.
    app = make_app(zaqar_url, project, claim_renew_interval=1,
                   poll_interval=30)
    ages = []

    def slow(event):
        claim = app.connection.queue('t-Slow').claim(
            id=current_event().claim_id)
        for _ in range(8):
            time.sleep(0.5)
            ages.append(claim.age)

    app.add_handler('Slow', slow, parallelism=2)
    app.enqueue({}, type='Slow')
    app.start()
    try:
        assert wait_for(lambda: app.counts.snapshot('Slow').get('handled'),
                        20)
    finally:
        app.close(5)
    # Renewed every second, the claim's age (reset by each renewal) never
    # reaches the 4 s the handler ran.
    assert len(ages) == 8 and max(ages) <= 2, ages


def test_close_under_load_loses_nothing(zaqar_url, project):
    handled = []
    lock = threading.Lock()

    def work(event):
        time.sleep(0.02)
        with lock:
            handled.append(event['n'])

    first = make_app(zaqar_url, project)
    first.add_handler('Load', work, parallelism=4)
    first.enqueue_many([{'n': n} for n in range(200)], type='Load')
    first.start()
    assert wait_for(lambda: len(handled) >= 40, 30)
    assert first.close(10) is True
    closed_with = list(handled)
    stats = first.connection.stats('t-Load')
    # Nothing stays claimed, and nothing handled is still queued.
    assert stats['claimed'] == 0
    assert stats['total'] == 200 - len(closed_with)

    second = make_app(zaqar_url, project)
    second.add_handler('Load', work, parallelism=4)
    second.start()
    try:
        assert wait_for(lambda: len(handled) >= 200, 60)
        time.sleep(0.5)
    finally:
        second.close(10)
    assert sorted(handled) == list(range(200))    # none lost, none twice


def test_bad_events_are_refused_and_nothing_is_posted(app):
    good = {'n': 1}
    with pytest.raises(Exception, match='not JSON-serialisable'):
        app.enqueue_many([good, {'n': object()}], type='Strict')
    with pytest.raises(Exception, match='one type'):
        app.enqueue_many([PaymentCheck(1), Refund(2)])
    with pytest.raises(Exception, match='needs type='):
        app.enqueue(good)
    for delay in (-1, True, 1.5):
        with pytest.raises(ValueError, match='delay must be an integer'):
            app.enqueue(good, type='Strict', delay=delay)
    assert app.connection.stats('t-Strict')['total'] == 0
    assert app.counts.snapshot('Strict') == {}


def test_removed_handler_stops_handling(app):
    seen = []
    app.add_handler('Gone', seen.append)
    app.start()
    app.enqueue({'n': 1}, type='Gone')
    assert wait_for(lambda: seen, 10)
    assert app.remove_handler('Gone') is True
    app.enqueue({'n': 2}, type='Gone')
    time.sleep(1)
    assert seen == [{'n': 1}]
    assert app.connection.stats('t-Gone')['free'] == 1


def test_claimed_events_that_never_started_are_released(app):
    # close() shuts the handler pool while a claim may be on the wire; the
    # events that claim returns must go back, not wait for claim expiry.
    calls = []
    handler = app.add_handler('Late', calls.append, parallelism=3)
    app.enqueue_many([{'n': n} for n in range(3)], type='Late')
    app._ensure_event_queue('t-Late', app._retry_policy(handler))
    from zaqar_delay.worker import runner
    typed = runner.TypeRunner(app.connection, handler, 't-Late',
                              app.settings, app.metrics)
    typed._pool.shutdown()
    assert typed._claim(3) is True
    stats = app.connection.stats('t-Late')
    assert (stats['claimed'], stats['total'], typed.busy) == (0, 3, 0)
    assert calls == []


@pytest.mark.parametrize('batch_size, held', [(1, 2), (3, 4)])
def test_events_wait_in_the_worker_unless_a_batch_is_one(zaqar_url, project,
                                                         batch_size, held):
    # docs/worker.md: a worker claims batch_size events whenever a handler
    # slot is free. Two slots, one busy: a batch of 3 takes 3 for the one
    # free slot, and 2 wait in the worker, their attempt used; with
    # batch_size 1 none waits.
    app = make_app(zaqar_url, project, batch_size=batch_size,
                   poll_interval=0.1)
    go_on, running = threading.Event(), []

    def busy(event):
        running.append(event['n'])
        go_on.wait(30)

    app.add_handler('Held', busy, parallelism=2)
    app.enqueue({'n': 0}, type='Held')
    app.start()
    try:
        assert wait_for(lambda: running == [0], 20)
        app.enqueue_many([{'n': n} for n in range(1, 9)], type='Held')
        assert wait_for(lambda: len(running) == 2, 20), running
        # Both slots busy: no claim more, however long it waits.
        time.sleep(0.5)
        assert len(running) == 2
        assert app.connection.stats('t-Held')['claimed'] == held
    finally:
        go_on.set()
        app.close(5)


def test_the_guides_example_runs_as_written(zaqar_url, project, capsys):
    # docs/worker.md's example, pointed at the test's Zaqar and project;
    # an even order is acknowledged with the context given at enqueue.
    guide = pathlib.Path(__file__).resolve().parents[2] / 'docs' / \
        'worker.md'
    [example] = re.findall(r'^```python\n(.*?)^```', guide.read_text(),
                           re.S | re.M)
    source = example.replace("'http://zaqar.example.org:8888'",
                             repr(zaqar_url)).replace(
        "project='shop'", 'project={!r}'.format(project))
    assert source.count(zaqar_url) == 1 and source.count(project) == 1
    namespace = {'__name__': 'shop_events'}
    exec(compile(source, 'docs/worker.md', 'exec'), namespace)
    app = namespace['app']
    app.enqueue(namespace['PaymentCheck'](order=8), context={'trace': 'a1b2'})
    app.start()
    try:
        assert wait_for(
            lambda: app.counts.snapshot('PaymentCheck').get('handled'), 20)
    finally:
        app.close(5)
    assert 'checking payment of order 8 trace a1b2' in capsys.readouterr().out
    policy = app.connection.metadata('shop-PaymentCheck')
    assert (policy['_max_claim_count'], policy['_redelivery_delay'],
            policy['_dead_letter_queue']) == (5, 30, 'shop-PaymentCheck-dead')


def test_events_waiting_at_close_have_used_their_one_attempt(zaqar_url,
                                                             project):
    # docs/worker.md: Zaqar counts each claim as an attempt, so with
    # max_attempts 1 the events close() releases unstarted go to the
    # dead-letter queue on their next claim, never handled.
    app = make_app(zaqar_url, project, batch_size=3, max_attempts=1,
                   close_timeout=10)
    started, go_on, handled = threading.Event(), threading.Event(), []

    def slow(event):
        started.set()
        go_on.wait(30)
        handled.append(event['n'])

    app.add_handler('Once', slow, parallelism=1)
    app.enqueue_many([{'n': n} for n in range(3)], type='Once')
    app.start()
    # All three claimed, one running: close() must not find none started.
    assert started.wait(20)
    assert wait_for(
        lambda: app.connection.stats('t-Once')['claimed'] == 3, 20)
    [runner] = app._runners.values()
    closing = threading.Thread(target=app.close)
    closing.start()
    # close() cancels the two waiting before the running handler ends
    # (their slots free); the claim is released whole once it has ended
    # (Zaqar releases whole claims).
    assert wait_for(lambda: runner.busy == 1, 20)
    go_on.set()
    closing.join(20)
    assert len(handled) == 1
    stats = app.connection.stats('t-Once')
    assert (stats['claimed'], stats['total']) == (0, 2), stats

    again = make_app(zaqar_url, project, batch_size=3, max_attempts=1)
    again.add_handler('Once', handled.append)
    again.start()
    try:
        assert wait_for(lambda: len(again.dead_letters('Once')) == 2, 20)
    finally:
        again.close(5)
    assert len(handled) == 1
    assert [letter.attempts for letter in again.dead_letters('Once')] == [
        1, 1]
