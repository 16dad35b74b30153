"""Group members not due yet are stored as ``w`` (waiting), not ``b``
(blocked): a listing of due messages, a persistent consumer's page and
``first`` walk the ``b`` range of ``zd_state_position``, and MongoDB
checks ``d <= now`` only on the documents it fetches, so every member
posted within the last delay was read and thrown away on each of them.
Settling makes a waiting member blocked once due. Work is counted
(tests/mongodb/examined.py), never timed."""

import pytest

from tests.contract.helpers import post
from tests.mongodb.examined import Examined
from zaqar_delay.drivers.mongodb import fields

DELAYED_GROUPED = {'_default_message_delay': 60, '_message_group_key': 'g'}
MEMBERS = 300


@pytest.fixture
def examined(monkeypatch):
    return Examined(monkeypatch)


def delayed_grouped_queue(driver, project, members=MEMBERS):
    """'q': five ready ungrouped messages, then ``members`` messages of
    one group, none due for 60 s (its head delayed, the rest waiting)."""
    driver.queue_controller.create('q', metadata=DELAYED_GROUPED,
                                   project=project)
    post(driver, 'q', project, *[{'n': n} for n in range(5)], delay=0)
    post(driver, 'q', project, *[{'g': 'a', 'n': n} for n in range(members)])


def states(driver, project):
    return sorted({doc[fields.STATE] for doc in driver.messages.find(
        fields.queue_filter('q', project), {fields.STATE: True})})


@pytest.mark.parametrize('include_claimed', [False, True])
def test_a_listing_of_due_messages_examines_no_member_not_due(
        driver, project, clock, examined, include_claimed):
    delayed_grouped_queue(driver, project)
    examined.reset()
    page = list(next(driver.message_controller.list(
        'q', project=project, echo=True, limit=10,
        include_claimed=include_claimed)))
    assert [m['body']['n'] for m in page] == list(range(5))
    assert examined.total <= len(page) + 2, examined.finds
    assert states(driver, project) == [fields.DELAYED, fields.READY,
                                       fields.WAITING]


def test_first_examines_no_member_not_due(driver, project, clock,
                                         examined):
    delayed_grouped_queue(driver, project)
    examined.reset()
    newest = driver.message_controller.first('q', project=project, sort=-1)
    assert newest['body'] == {'n': 4}
    assert examined.total <= 3, examined.finds


def test_waiting_members_are_listed_once_due_and_in_order(driver, project,
                                                         clock):
    delayed_grouped_queue(driver, project, members=3)
    listed = driver.message_controller.list
    everything = list(next(listed('q', project=project, echo=True,
                                  include_delayed=True)))
    assert len(everything) == 8
    clock.advance(61)
    page = list(next(listed('q', project=project, echo=True)))
    assert [m['body']['n'] for m in page] == [0, 1, 2, 3, 4, 0, 1, 2]
    assert fields.WAITING not in states(driver, project)


def test_a_waiting_member_becomes_the_head_when_the_head_goes(
        driver, project, clock):
    delayed_grouped_queue(driver, project, members=2)
    head = [m for m in next(driver.message_controller.list(
        'q', project=project, echo=True, include_delayed=True))
        if 'g' in m['body']][0]
    driver.message_controller.delete('q', head['id'], project=project)
    clock.advance(61)
    popped = driver.message_controller.pop('q', 10, project=project)
    assert [m['body'] for m in popped] == [{'n': n} for n in range(5)] + [
        {'g': 'a', 'n': 1}]


def test_a_member_an_earlier_release_stored_blocked_stays_hidden(
        driver, project, clock):
    """Before ``w``, members not due were stored ``b``: still not listed
    before they are due, listed after."""
    delayed_grouped_queue(driver, project, members=2)
    driver.messages.update_many(
        fields.queue_filter('q', project, **{fields.STATE: fields.WAITING}),
        {'$set': {fields.STATE: fields.BLOCKED}})
    listed = driver.message_controller.list
    assert len(list(next(listed('q', project=project, echo=True)))) == 5
    assert driver.message_controller.first(
        'q', project=project, sort=-1)['body'] == {'n': 4}
    clock.advance(61)
    assert len(list(next(listed('q', project=project, echo=True)))) == 7


def test_a_claim_behind_delayed_messages_examines_what_it_takes(
        driver, project, clock, examined):
    """README: a claim costs the same with delayed messages queued ahead
    as on an empty queue. Delayed messages (and members waiting) are in
    ranges of their own: a claim of 5 behind 300 of them examines the 5
    it takes (and the settle probe's nothing)."""
    driver.queue_controller.create('q', metadata=DELAYED_GROUPED,
                                   project=project)
    post(driver, 'q', project, *[{'n': n} for n in range(300)])
    post(driver, 'q', project, *[{'g': 'a', 'n': n} for n in range(300)])
    post(driver, 'q', project, *[{'n': n} for n in range(5)], delay=0)
    examined.reset()
    claimed = driver.claim_controller.create(
        'q', {'ttl': 60, 'grace': 0}, project=project, limit=5)[1]
    assert [m['body'] for m in claimed] == [{'n': n} for n in range(5)]
    assert examined.total <= 5, examined.finds
