"""Swift: messages carried in with their age (zaqar-delay-migrate) under
retention's ``time`` (carried.py). The contract suite
(tests/contract/test_carried_age.py) covers the behaviour; these tests
look at the marks and at what a claim pays for the age check."""

import json
import uuid

from tests.contract.helpers import CLIENT, bodies, claim, post
from tests.swift.requests import Requests
from zaqar_delay import rules
from zaqar_delay.drivers.swift import names


def carry(driver, queue, project, *ages_s):
    driver.message_controller._insert(queue, project, [
        rules.NewMessage(id=str(uuid.uuid4()), ttl=300, delay=0,
                         body='{} s'.format(age), body_json=json.dumps(age),
                         age_ms=age * 1000)
        for age in ages_s], str(CLIENT))


def marks(driver, queue, project):
    qs = driver.queue_state(queue, project)
    return [(e['name'], names.ct_params(e['content_type'])['cr'])
            for e in driver.store.listing_all(qs.c, 'y/')]


def removed(driver, queue, project):
    return driver.message_controller.stats(
        queue, project)['retention']['removed']


def test_an_insert_marks_what_it_carried_in_until_the_cut_passes_it(
        driver, clock, make_queue, project):
    queue = make_queue({'_retention': {'time': 60}})
    post(driver, queue, project, 'posted')
    assert marks(driver, queue, project) == []
    now = driver.now_ms()
    carry(driver, queue, project, 70, 10, 20)
    [(name, oldest)] = marks(driver, queue, project)
    assert int(oldest) == now - 70_000
    clean = driver.message_controller.clean
    assert clean(queue, project, 10) == (1, False)
    # Nothing past time is left in its range: its cr moves on to the
    # oldest left (20 s old), so steps skip its range until then.
    clean(queue, project, 10)
    assert marks(driver, queue, project) == [(name, str(now - 20_000))]
    clock.advance(50)
    # Both carried ones are past time, and the cut is not past them yet.
    assert clean(queue, project, 10) == (2, False)
    assert removed(driver, queue, project) == 3
    clean(queue, project, 10)
    assert marks(driver, queue, project) == []
    assert bodies(claim(driver, queue, project)[1]) == ['posted']


def test_a_claim_pays_nothing_for_the_age_of_what_it_hands_out(
        driver, clock, make_queue, project, monkeypatch):
    # The age is judged in the record the claim reads anyway: a carried
    # message that is kept costs what a posted one does.
    costs = []
    for fill in (lambda q: post(driver, q, project, 'posted'),
                 lambda q: carry(driver, q, project, 30)):
        queue = make_queue({'_retention': {'time': 60}})
        fill(queue)
        requests = Requests(driver, monkeypatch)
        costs.append(requests.during(
            lambda: claim(driver, queue, project)))
        monkeypatch.undo()
    assert costs[0] == costs[1]


def test_a_claim_removes_and_counts_what_it_won_past_time(
        driver, make_queue, project):
    queue = make_queue({'_retention': {'time': 60}})
    carry(driver, queue, project, 70, 80, 10)
    assert bodies(claim(driver, queue, project)[1]) == ['10 s']
    assert removed(driver, queue, project) == 2
    qs = driver.queue_state(queue, project)
    left = [e['name'] for e in driver.store.listing_all(qs.c, 'm/')]
    assert len(left) == 1
    # Its locks and filings went with it; the ret lock stays, a tombstone
    # (retention.py).
    assert driver.message_controller.clean(queue, project, 10) == (0, False)
