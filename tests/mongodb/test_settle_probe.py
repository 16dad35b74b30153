"""Claims, pops and plain listings settle a queue only when one probe
finds something due (state.settle_if_due), and fully on every
SETTLE_EVERYth call: what they skip must never show (issue 21)."""

from tests.contract.helpers import bodies, claim, listed, post
from zaqar_delay.drivers.mongodb import claims
from zaqar_delay.drivers.mongodb import fields as f
from zaqar_delay.drivers.mongodb import queries
from zaqar_delay.drivers.mongodb import state


def ended_claim_documents(driver, project):
    return driver.claims.count_documents({f.PROJECT: project})


def test_a_claim_on_a_queue_with_nothing_due_sends_one_probe_not_three(
        driver, clock, project, monkeypatch):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a')
    now = driver.now()
    read = {'messages': [], 'claims': []}
    for name in read:
        collection = getattr(driver, name)
        monkeypatch.setattr(collection, 'find', lambda query, *args, _n=name,
                            _find=collection.find, **kwargs: (
                                read[_n].append(query),
                                _find(query, *args, **kwargs))[1])
    claim(driver, 'q', project)
    assert read['messages'][0] == queries.needs_settling(
        'q', project, now).filter
    settle_reads = [queries.delayed_due('q', project, now).filter,
                    queries.expired('q', project, now).filter]
    assert not [q for q in read['messages'] if q in settle_reads]
    assert read['claims'] == []   # no read of ended claims


def test_due_delayed_expired_and_redelivered_messages_are_found(
        driver, clock, project):
    # Each thing the probe looks for, alone on its queue: the claim
    # after it must see the settled queue.
    queues = driver.queue_controller
    queues.create('delayed', {'_default_message_delay': 30},
                  project=project)
    post(driver, 'delayed', project, 'later')
    queues.create('expiring', project=project)
    post(driver, 'expiring', project, 'gone', ttl=60)
    post(driver, 'expiring', project, 'stays', ttl=600)
    queues.create('redelivered', {'_redelivery_delay': 20},
                  project=project)
    post(driver, 'redelivered', project, 'again')
    claim(driver, 'redelivered', project, ttl=60, grace=0)
    assert bodies(claim(driver, 'delayed', project)[1]) == []
    clock.advance(61)
    assert bodies(claim(driver, 'delayed', project)[1]) == ['later']
    assert bodies(claim(driver, 'expiring', project)[1]) == ['stays']
    assert driver.messages.count_documents(
        {f.PROJECT: project, f.QUEUE: 'expiring'}) == 1   # purged
    # The claim ended, its redelivery delay runs: claimable in neither
    # state, settled or not.
    assert bodies(claim(driver, 'redelivered', project)[1]) == []
    clock.advance(20)
    assert bodies(claim(driver, 'redelivered', project)[1]) == ['again']


def test_a_listing_with_claimed_messages_settles_an_ended_claim_at_once(
        driver, clock, project):
    # Tried: end a claim whose redelivery delay still runs, let a claim
    # skip the settle, then list claimed messages: the message must show
    # as delayed (hidden), not as claimed or free.
    driver.queue_controller.create('q', {'_redelivery_delay': 600},
                                   project=project)
    post(driver, 'q', project, 'a')
    claim(driver, 'q', project, ttl=60, grace=0)
    clock.advance(61)
    assert bodies(claim(driver, 'q', project)[1]) == []
    assert listed(driver, 'q', project, include_claimed=True) == []
    assert bodies(listed(driver, 'q', project, include_claimed=True,
                         include_delayed=True)) == ['a']


def test_every_hundredth_call_removes_claims_that_ended_with_nothing_left(
        driver, clock, project):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a', 'b')
    claim_id, messages = claim(driver, 'q', project, ttl=60, grace=0)
    for message in messages:
        driver.message_controller.delete('q', message['id'],
                                         project=project, claim=claim_id)
    clock.advance(61)
    calls = 0
    while ended_claim_documents(driver, project):
        assert calls < state.SETTLE_EVERY, 'never removed'
        driver.message_controller.pop('q', 1, project=project)
        calls += 1
    # The probe found nothing due, so only the schedule removed it; the
    # calls since the queue's first one are what is counted.
    assert calls == state.SETTLE_EVERY - 1


def test_pops_leave_their_claim_documents_to_the_next_full_settle(
        driver, clock, project):
    # A pop does not delete its claim document (one request less): each
    # ends after claims.POP_CLAIM_TTL and the next full settle removes it
    # with the others that ended.
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, *range(3 * state.SETTLE_EVERY))
    popped = [m['body'] for _ in range(state.SETTLE_EVERY)
              for m in driver.message_controller.pop('q', 1,
                                                     project=project)]
    assert popped == list(range(state.SETTLE_EVERY))
    assert ended_claim_documents(driver, project) == state.SETTLE_EVERY
    clock.advance(claims.POP_CLAIM_TTL + 1)
    for _ in range(state.SETTLE_EVERY):
        popped += [m['body'] for m in driver.message_controller.pop(
            'q', 1, project=project)]
    # The first hundred ended and are gone; the second hundred live on.
    assert driver.claims.count_documents(
        {f.PROJECT: project, f.EXPIRES: {'$lte': driver.now()}}) == 0
    assert ended_claim_documents(driver, project) == state.SETTLE_EVERY
    # Ending them gave nothing back: every pop took a message of its own.
    assert popped == list(range(2 * state.SETTLE_EVERY))
    clock.advance(claims.POP_CLAIM_TTL + 1)
    driver.gc()
    assert ended_claim_documents(driver, project) == 0
    assert bodies(listed(driver, 'q', project, include_claimed=True)) == (
        list(range(2 * state.SETTLE_EVERY, 3 * state.SETTLE_EVERY)))


def test_the_schedule_starts_again_past_its_bound(monkeypatch):
    monkeypatch.setattr(state.SettleSchedule, 'MAX_QUEUES', 3)
    schedule = state.SettleSchedule()
    for queue in ('a', 'b', 'c'):
        assert schedule.may_skip(queue, 'p')
    assert schedule.may_skip('d', 'p')   # a fourth queue: counts restart
    assert len(schedule._calls) == 1
