"""Claims and listings behind messages that expired together, more than
a read's purge batch (state.PURGE_BATCH) removes: MongoDB checks ``e``
only on the documents it fetches, so a read whose filter says ``e > now``
walked every expired message not purged yet, and the next read walked
them again. Now a read deletes the expired ones it meets and reads past
them (state.live_front): each find examines at most what it asks for,
none is examined twice, and one claim stops after EXPIRED_BUDGET of them.
Work is counted (tests/mongodb/examined.py), never timed."""

import pytest

from tests.contract.helpers import claim, post
from tests.mongodb.examined import Examined
from zaqar_delay.drivers.mongodb import state

BACKLOG = 1300


@pytest.fixture
def examined(monkeypatch):
    return Examined(monkeypatch)


def expired_backlog(driver, project, clock, size=BACKLOG):
    """'q': ``size`` messages that expired together, then five live
    ones."""
    driver.queue_controller.create('q', project=project)
    for start in range(0, size, 100):
        post(driver, 'q', project, *range(start, start + 100), ttl=60)
    post(driver, 'q', project, *['live'] * 5, ttl=3600)
    clock.advance(61)


def drain(examined, read):
    """Run ``read`` until it returns something: (what it returned, the
    documents each run examined, the most one find examined)."""
    per_read, largest = [], 0
    for _ in range(BACKLOG // state.EXPIRED_BUDGET + 2):
        examined.reset()
        got = read()
        per_read.append(examined.total)
        largest = max(largest, examined.largest)
        if got:
            return got, per_read, largest
    raise AssertionError('nothing live found: %s' % per_read)


def bounded(per_read, largest, limit):
    # One call: its settle's purge batch, then its budget of expired
    # messages and the live ones it returns.
    assert max(per_read) <= (state.PURGE_BATCH + state.EXPIRED_BUDGET
                             + limit), per_read
    assert largest <= max(limit, state.PURGE_BATCH), largest
    # No expired message examined twice, whatever the number of calls.
    assert sum(per_read) <= BACKLOG + len(per_read) * limit, per_read


def test_claims_behind_an_expired_backlog_examine_each_message_once(
        driver, project, clock, examined):
    expired_backlog(driver, project, clock)
    got, per_read, largest = drain(
        examined, lambda: claim(driver, 'q', project, limit=5)[1])
    assert [m['body'] for m in got] == ['live'] * 5
    bounded(per_read, largest, 5)


def test_claims_of_one_behind_an_expired_backlog_are_bounded(
        driver, project, clock, examined):
    """A claim (or pop) of one is one findAndModify, which cannot delete
    what it walks: while the settle's purge leaves expired messages, it
    reads candidates instead."""
    expired_backlog(driver, project, clock)
    got, per_read, largest = drain(
        examined, lambda: claim(driver, 'q', project, limit=1)[1])
    assert [m['body'] for m in got] == ['live']
    bounded(per_read, largest, 1)


def test_a_listing_behind_an_expired_backlog_examines_each_message_once(
        driver, project, clock, examined):
    """A listing has no budget (an empty page would end a client's
    paging while messages follow): it goes through the run in finds of
    at most PURGE_BATCH, deleting what it meets, so the next listing
    examines only what it lists."""
    expired_backlog(driver, project, clock)

    def page():
        return list(next(driver.message_controller.list(
            'q', project=project, echo=True, limit=10)))

    assert [m['body'] for m in page()] == ['live'] * 5
    assert examined.largest <= state.PURGE_BATCH, examined.finds
    # The call's settle purges a batch first, by the expiry index.
    assert examined.total <= BACKLOG + state.PURGE_BATCH + 5
    examined.reset()
    assert [m['body'] for m in page()] == ['live'] * 5
    assert examined.total <= 5, examined.finds


def test_a_pop_goes_past_the_whole_backlog_in_one_call(driver, project,
                                                       clock):
    """Zaqar's queue purge pops until a pop comes back empty: a pop has
    no budget."""
    expired_backlog(driver, project, clock)
    popped = driver.message_controller.pop('q', 5, project=project)
    assert [m['body'] for m in popped] == ['live'] * 5
