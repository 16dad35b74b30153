"""Swift: messages carried in with their age (zaqar-delay-migrate) under
retention's ``time`` (carried.py). The contract suite
(tests/contract/test_carried_age.py) covers the behaviour; these tests
look at the marks and at what a claim pays for the age check."""

import json
import uuid

from tests.contract.helpers import CLIENT, bodies, claim, post
from tests.swift.requests import Requests
from zaqar_delay import rules
from zaqar_delay.drivers.swift import carried
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


def test_the_layout_upgrade_marks_what_an_earlier_release_carried_in(
        driver, clock, make_queue, project, monkeypatch):
    queue = make_queue({'_retention': {'time': 60}})
    post(driver, queue, project, 'posted')
    now = driver.now_ms()
    # As an insert of a release before marks existed: no y/ object.
    monkeypatch.setattr(carried, 'mark', lambda qs, messages, now: None)
    carry(driver, queue, project, 70, 10, 20)
    monkeypatch.undo()
    carry(driver, queue, project, 90)
    assert [int(cr) for _, cr in marks(driver, queue, project)] == [
        now - 90_000]
    clean = driver.message_controller.clean
    # The cleanup finds only the marked one: the other one past time is
    # left until the cut passes it (what the upgrade is for).
    assert clean(queue, project, 10) == (1, False)
    said = []
    driver.upgrade_layout(said.append)
    assert ('Swift queue {!r} of project {!r}: marked 3 messages carried '
            'in without a mark (1 marks)'.format(queue, project)) in said
    assert said[-1].startswith('Swift layout is version 1: ')
    assert str(now - 70_000) in [cr for _, cr in marks(driver, queue,
                                                       project)]
    assert clean(queue, project, 10) == (1, False)
    assert removed(driver, queue, project) == 2
    # Run again, it finds every carried message marked; the posted one,
    # whose position follows its age, is never marked.
    marked_after = marks(driver, queue, project)
    said.clear()
    driver.upgrade_layout(said.append)
    assert not any(queue in line for line in said)
    assert marks(driver, queue, project) == marked_after
    clock.advance(50)
    assert clean(queue, project, 10) == (2, False)
    assert bodies(claim(driver, queue, project)[1]) == ['posted']


def test_the_layout_upgrade_writes_one_mark_per_run_of_carried_messages(
        driver, clock, make_queue, project, monkeypatch):
    queue = make_queue()
    monkeypatch.setattr(carried, 'mark', lambda qs, messages, now: None)
    carry(driver, queue, project, 100, 200)
    post(driver, queue, project, 'between')
    carry(driver, queue, project, 300)
    monkeypatch.undo()
    qs = driver.queue_state(queue, project)
    assert carried.mark_unmarked(qs) == (3, 2)
    positions = [int(e['name'][2:])
                 for e in driver.store.listing_all(qs.c, 'p/')]
    found = {e['name']: names.ct_params(e['content_type'])
             for e in driver.store.listing_all(qs.c, 'y/')}
    now = driver.now_ms()
    assert {name: (int(params['last']), now - int(params['cr']))
            for name, params in found.items()} == {
        names.carried_obj(positions[0]): (positions[1], 200_000),
        names.carried_obj(positions[3]): (positions[3], 300_000)}
    assert carried.mark_unmarked(qs) == (0, 0)
