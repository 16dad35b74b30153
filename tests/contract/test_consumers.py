"""SPEC §5 (issue 11): persistent consumers, on every backend.

A persistent consumer is a subscription whose subscriber is
``cursor:<consume_id>``; it lists with its consume_id as Client-ID, and
the list marker is its cursor (zaqar_delay/consumers.py):

* a marker acknowledges up to it and becomes the cursor; it may be neither
  behind the stored cursor nor past the last position handed out (a 400
  naming the stored cursor, nothing changed);
* without a marker the consumer resumes after its cursor; a page not
  acknowledged is handed again (at least once);
* a page stops before the first message that is not due, and before
  any position a post is still storing;
* positions skipped because their message went (retention) add to lost;
* with ``consumers_required`` a message every live consumer acknowledged
  is no longer kept (unless claimed), for good.
"""

import dataclasses
import time
import uuid

import pytest
from zaqar.storage import errors as storage_errors

from tests.contract.helpers import bodies, claim, listed, post
from tests.contract.test_retention import (
    assert_named, assert_reads, clean_all, operator, post_each, removed,
    through_pipeline)
from zaqar_delay import consumers
from zaqar_delay import errors


class Reader:
    """A persistent consumer registered through the subscription
    controller, as python-zaqarclient would."""

    def __init__(self, driver, queue, project, consume_id=None):
        self.driver, self.queue, self.project = driver, queue, project
        self.id = consume_id or uuid.uuid4()
        self.subscriber = 'cursor:' + str(self.id)
        self.sid = driver.subscription_controller.create(
            queue, self.subscriber, 3600, {}, project=project)

    def page(self, marker=None, limit=10):
        """(bodies, marker) of one listing with this consumer's Client-ID."""
        pages = self.driver.message_controller.list(
            self.queue, project=self.project, marker=marker, limit=limit,
            client_uuid=self.id)
        return bodies(next(pages)), next(pages)

    def read_all(self, limit=10):
        """Acknowledge everything there is; the marker of the last page."""
        got, marker = self.page()
        while got:
            got, marker = self.page(marker, limit)
        return marker

    def state(self):
        found = [c for c in self.driver.message_controller.list_consumers(
            self.queue, self.project)[1] if c.consume_id == str(self.id)]
        return found[0] if found else None

    def options(self):
        return self.driver.subscription_controller.get(
            self.queue, self.sid, project=self.project)['options']

    def remove(self):
        self.driver.subscription_controller.delete(
            self.queue, self.sid, project=self.project)


def consumer_ids(driver, queue, project):
    return sorted(c.consume_id for c in
                  driver.message_controller.list_consumers(queue,
                                                           project)[1])


def positions(driver, queue, project):
    """{body: position} of every message a plain listing returns."""
    return {m['body']: m.position
            for m in listed(driver, queue, project, include_claimed=True,
                            include_delayed=True)}


# -- registration ------------------------------------------------------------

# A fixed id: parameters are test ids, which every xdist worker must
# collect alike.
SOME_ID = uuid.UUID('0f8738f5-694a-4a54-b936-600821b323ba')


@pytest.mark.parametrize('subscriber', [
    'cursor:', 'cursor:not-a-uuid',
    'cursor:' + str(SOME_ID).upper(),
    'cursor:' + SOME_ID.hex,
    'cursor:{' + str(SOME_ID) + '}'])
def test_a_malformed_cursor_subscriber_is_refused_and_nothing_stored(
        driver, make_queue, project, subscriber):
    queue = make_queue()
    with pytest.raises(errors.InvalidInput) as raised:
        driver.subscription_controller.create(queue, subscriber, 3600, {},
                                              project=project)
    assert 'subscriber' in str(raised.value)
    assert repr(subscriber) in str(raised.value)
    assert list(next(driver.subscription_controller.list(
        queue, project=project))) == []
    assert consumer_ids(driver, queue, project) == []


def test_registering_is_idempotent_and_other_schemes_are_not_consumers(
        driver, make_queue, project):
    queue = make_queue()
    driver.subscription_controller.create(queue, 'http://127.0.0.1:9/x',
                                          3600, {}, project=project)
    assert consumer_ids(driver, queue, project) == []
    reader = Reader(driver, queue, project)
    assert reader.sid
    state = reader.state()
    assert (state.cursor, state.handed, state.lost) == (None, None, 0)
    post(driver, queue, project, 'a', 'b')
    _, marker = reader.page(limit=1)
    reader.page(marker)
    # Subscribing again is a conflict for Zaqar and leaves the state alone.
    assert driver.subscription_controller.create(
        queue, reader.subscriber, 3600, {}, project=project) is None
    assert reader.state().cursor == int(marker)
    assert consumer_ids(driver, queue, project) == [str(reader.id)]


def test_consumers_are_per_queue_and_project(driver, make_queue, project):
    queue, other = make_queue(), make_queue()
    reader = Reader(driver, queue, project)
    assert consumer_ids(driver, other, project) == []
    assert consumer_ids(driver, queue, project + '-x') == []
    post(driver, other, project, 'elsewhere')
    # On a queue where it is not registered, the Client-ID lists as usual.
    pages = driver.message_controller.list(other, project=project,
                                           client_uuid=reader.id, echo=True)
    assert bodies(next(pages)) == ['elsewhere']
    assert reader.state().handed is None


def test_deleting_the_subscription_removes_the_consumer(
        driver, make_queue, project):
    queue = make_queue()
    reader = Reader(driver, queue, project)
    keep = Reader(driver, queue, project)
    post(driver, queue, project, 'a')
    reader.page()
    reader.remove()
    assert consumer_ids(driver, queue, project) == [str(keep.id)]
    # Registering again starts afresh.
    again = Reader(driver, queue, project, consume_id=reader.id)
    state = again.state()
    assert (state.cursor, state.handed, state.lost) == (None, None, 0)


def test_changing_the_subscriber_moves_the_consumer(driver, make_queue,
                                                   project):
    queue = make_queue()
    subs = driver.subscription_controller
    sid = subs.create(queue, 'http://127.0.0.1:9/x', 3600, {},
                      project=project)
    first, second = uuid.uuid4(), uuid.uuid4()
    subs.update(queue, sid, project=project,
                subscriber='cursor:' + str(first))
    assert consumer_ids(driver, queue, project) == [str(first)]
    subs.update(queue, sid, project=project,
                subscriber='cursor:' + str(second))
    assert consumer_ids(driver, queue, project) == [str(second)]
    with pytest.raises(errors.InvalidInput):
        subs.update(queue, sid, project=project, subscriber='cursor:bad')
    assert subs.get(queue, sid, project=project)['subscriber'] == (
        'cursor:' + str(second))
    assert consumer_ids(driver, queue, project) == [str(second)]
    subs.update(queue, sid, project=project,
                subscriber='http://127.0.0.1:9/y')
    assert consumer_ids(driver, queue, project) == []


# -- cursor semantics --------------------------------------------------------

def test_pages_acknowledge_by_marker_and_resume_after_the_cursor(
        driver, make_queue, project):
    queue = make_queue()
    post(driver, queue, project, 'm0', 'm1', 'm2', 'm3', 'm4')
    at = positions(driver, queue, project)
    reader = Reader(driver, queue, project)
    got, marker = reader.page(limit=2)
    assert (got, marker) == (['m0', 'm1'], str(at['m1']))
    # Not acknowledged: handed again (at least once), cursor unchanged.
    assert reader.page(limit=2) == (['m0', 'm1'], str(at['m1']))
    assert reader.state().cursor is None
    assert reader.page(marker, limit=2) == (['m2', 'm3'], str(at['m3']))
    assert reader.state().cursor == at['m1']
    # A dropped reply: resuming without a marker hands the page again.
    assert reader.page(limit=2) == (['m2', 'm3'], str(at['m3']))
    assert reader.page(str(at['m3']), limit=2) == (['m4'], str(at['m4']))
    # Everything acknowledged: an empty page, the marker stays.
    assert reader.page(str(at['m4'])) == ([], str(at['m4']))
    assert reader.page() == ([], None)
    state = reader.state()
    assert (state.cursor, state.handed, state.lost) == (at['m4'],
                                                       at['m4'], 0)
    # New messages follow the cursor.
    post(driver, queue, project, 'm5')
    assert reader.page() == (
        ['m5'], str(positions(driver, queue, project)['m5']))


def test_the_same_marker_twice_acknowledges_once(driver, make_queue,
                                                 project):
    queue = make_queue()
    post(driver, queue, project, 'a', 'b', 'c')
    reader = Reader(driver, queue, project)
    _, marker = reader.page(limit=1)
    assert reader.page(marker, limit=1)[0] == ['b']
    # A retried request (lost reply) with the same marker: same page.
    assert reader.page(marker, limit=1)[0] == ['b']
    assert reader.state().cursor == int(marker)


def test_a_consumer_gets_every_message_claimed_ones_and_its_own_posts(
        driver, make_queue, project):
    queue = make_queue()
    reader = Reader(driver, queue, project)
    post(driver, queue, project, 'a', 'b')
    post(driver, queue, project, 'mine', client=reader.id)
    assert bodies(claim(driver, queue, project, limit=1)[1]) == ['a']
    assert reader.page()[0] == ['a', 'b', 'mine']
    assert reader.state().lost == 0


def test_a_marker_one_past_the_last_handed_out_is_refused(
        driver, make_queue, project):
    queue = make_queue()
    post(driver, queue, project, 'a', 'b', 'c')
    at = positions(driver, queue, project)
    reader = Reader(driver, queue, project)
    # Nothing handed out yet: no marker is acceptable.
    with pytest.raises(consumers.CursorMismatch):
        reader.page(str(at['a']))
    _, marker = reader.page(limit=1)
    reader.page(marker, limit=1)                  # cursor a, handed b
    before = reader.state()
    with pytest.raises(consumers.CursorMismatch) as raised:
        reader.page(str(at['b'] + 1))
    assert 'cursor is {}'.format(at['a']) in str(raised.value)
    assert isinstance(raised.value, errors.InvalidInput)
    after = reader.state()
    assert (after.cursor, after.handed, after.lost) == (
        before.cursor, before.handed, before.lost)
    # Exactly the last handed out is fine.
    assert reader.page(str(at['b']))[0] == ['c']


def test_a_rewind_by_one_is_refused_naming_the_stored_cursor(
        driver, make_queue, project):
    queue = make_queue()
    post(driver, queue, project, 'a', 'b', 'c')
    at = positions(driver, queue, project)
    reader = Reader(driver, queue, project)
    reader.page(limit=2)
    reader.page(str(at['b']))
    with pytest.raises(consumers.CursorMismatch) as raised:
        reader.page(str(at['b'] - 1))
    assert 'cursor is {}'.format(at['b']) in str(raised.value)
    assert reader.state().cursor == at['b']
    # The stored cursor itself is not a rewind.
    assert reader.page(str(at['b']))[0] == ['c']


@pytest.mark.parametrize('marker', ['not-a-position', 'abc', '-1', '3x',
                                    '+1', ' 1', '1_0'])
def test_an_unknown_marker_is_not_interpreted(driver, make_queue, project,
                                              marker):
    """A plain listing gets Zaqar's empty page for a marker that names no
    position; a persistent consumer gets CursorMismatch (a 400) naming
    the marker and its cursor, not an empty page it would read forever,
    and its state is left as it was."""
    queue = make_queue()
    post(driver, queue, project, 'a')
    if marker in ('not-a-position', 'abc', '-1', '3x'):
        pages = driver.message_controller.list(queue, project=project,
                                               marker=marker)
        assert list(next(pages)) == []
    reader = Reader(driver, queue, project)
    _, handed = reader.page()
    before = reader.state()
    with pytest.raises(consumers.CursorMismatch) as raised:
        reader.page(marker)
    assert repr(marker) in str(raised.value)
    assert 'cursor is none' in str(raised.value)
    assert isinstance(raised.value, errors.InvalidInput)
    assert reader.state() == dataclasses.replace(
        before, last_active_ms=reader.state().last_active_ms)
    assert reader.state().cursor is None
    assert reader.page(handed)[0] == []


def test_a_consumer_marker_past_every_position_is_refused(
        driver, make_queue, project):
    """2**63 names no position of any store (MongoDB's are int64): a
    persistent consumer was never handed it, so it is refused as any
    marker past what was handed is, and reaches no store."""
    queue = make_queue()
    post(driver, queue, project, 'a')
    reader = Reader(driver, queue, project)
    reader.page()
    with pytest.raises(consumers.CursorMismatch):
        reader.page(str(2 ** 63))


@operator(length=2)
def test_a_cursor_equal_to_the_oldest_kept_loses_nothing(
        driver, make_queue, project):
    queue = make_queue()
    reader = Reader(driver, queue, project)
    post(driver, queue, project, 'a', 'b')
    at = positions(driver, queue, project)
    reader.page(limit=1)
    reader.page(str(at['a']), limit=1)             # cursor a
    post(driver, queue, project, 'c')              # b, c kept; a gone
    assert reader.page()[0] == ['b', 'c']
    assert reader.state().lost == 0


@operator(length=2)
def test_a_cursor_older_than_the_oldest_kept_resumes_there_and_counts_lost(
        driver, make_queue, project):
    queue = make_queue()
    reader = Reader(driver, queue, project)
    post(driver, queue, project, 'a')
    marker = reader.page()[1]
    reader.page(marker)                            # cursor a
    post(driver, queue, project, 'b', 'c', 'd', 'e')   # d, e kept
    assert reader.page()[0] == ['d', 'e']
    assert reader.state().lost == 2
    # Handing the same page again does not count the gap twice.
    got, marker = reader.page()
    assert got == ['d', 'e']
    assert reader.state().lost == 2
    reader.page(marker)
    assert reader.options()['lost'] == 2


def test_what_went_before_the_first_page_is_not_lost(driver, make_queue,
                                                     project):
    queue = make_queue()
    post(driver, queue, project, 'a', 'b')
    driver.message_controller.pop(queue, 1, project=project)
    reader = Reader(driver, queue, project)
    assert reader.page()[0] == ['b']
    assert reader.state().lost == 0


def test_a_delayed_message_is_never_skipped(driver, make_queue, project,
                                           clock):
    queue = make_queue({'_default_message_delay': 30})
    reader = Reader(driver, queue, project)
    post(driver, queue, project, 'now', delay=0)
    post(driver, queue, project, 'later')
    post(driver, queue, project, 'after', delay=0)
    got, marker = reader.page()
    assert got == ['now']
    assert reader.page(marker) == ([], marker)
    clock.advance(29.999)
    assert reader.page(marker) == ([], marker)
    clock.advance(0.001)
    assert reader.page(marker)[0] == ['later', 'after']
    assert reader.state().lost == 0


def test_a_retried_post_loses_nothing(driver, make_queue, project,
                                      monkeypatch):
    # A post whose reply is lost runs again with the same ids (the
    # store call twice): the copy is skipped and must leave no position a
    # persistent consumer counts as lost.
    queue = make_queue()
    reader = Reader(driver, queue, project)
    post(driver, queue, project, 'a', 'b')
    store = driver.message_controller._insert

    def stored_twice(*args):
        store(*args)
        store(*args)

    monkeypatch.setattr(driver.message_controller, '_insert', stored_twice)
    post(driver, queue, project, 'c', 'd')
    monkeypatch.undo()
    post(driver, queue, project, 'e', 'f')
    # Pages of two: the next page begins right after the retried post.
    got, marker = reader.page(limit=2)
    while True:
        more, marker = reader.page(marker, limit=2)
        if not more:
            break
        got += more
    assert got == ['a', 'b', 'c', 'd', 'e', 'f']
    assert reader.state().lost == 0


def test_a_page_stops_before_a_post_still_storing(driver, make_queue,
                                                  project, monkeypatch):
    # A backend whose posts take positions before storing (MongoDB)
    # reports the lowest one a post may still fill; the page stops there,
    # with nothing counted as lost, and goes on once the post is done.
    queue = make_queue()
    reader = Reader(driver, queue, project)
    post(driver, queue, project, 'a', 'b', 'c')
    held = positions(driver, queue, project)['b']
    monkeypatch.setattr(driver.message_controller, '_reserved_from',
                        lambda *args: held)
    got, marker = reader.page()
    assert got == ['a']
    assert reader.page(marker) == ([], marker)
    monkeypatch.undo()
    assert reader.page(marker)[0] == ['b', 'c']
    assert reader.state().lost == 0


# -- read-by-all (consumers_required) ----------------------------------------

@operator(consumers_required=2)
@pytest.mark.parametrize('live', [1, 2, 3])
def test_read_by_all_needs_required_consumers_to_acknowledge(
        driver, make_queue, project, live):
    queue = make_queue()
    readers = [Reader(driver, queue, project) for _ in range(live)]
    posted = post_each(driver, queue, project, 'a', 'b', 'c')
    for reader in readers:
        assert reader.page(limit=2)[0] == ['a', 'b']
    at = positions(driver, queue, project)
    for reader in readers[:-1]:
        reader.page(str(at['b']), limit=2)
        assert_reads(driver, queue, project, posted, ['a', 'b', 'c'])
    readers[-1].page(str(at['b']), limit=2)
    kept = ['c'] if live >= 2 else ['a', 'b', 'c']
    assert_reads(driver, queue, project, posted, kept)
    assert bodies(claim(driver, queue, project)[1]) == kept
    clean_all(driver, queue, project, 1)
    assert removed(driver, queue, project) == 3 - len(kept)
    # Every consumer still gets the rest.
    for reader in readers:
        assert reader.page(str(at['b']))[0] == ['c']


@operator(consumers_required=2)
def test_pop_never_returns_what_all_acknowledged(driver, make_queue,
                                                 project):
    queue = make_queue()
    readers = [Reader(driver, queue, project) for _ in range(2)]
    post(driver, queue, project, 'a', 'b')
    at = positions(driver, queue, project)
    for reader in readers:
        reader.page(limit=1)
        reader.page(str(at['a']))
    assert bodies(driver.message_controller.pop(queue, 10,
                                                project=project)) == ['b']


@operator(consumers_required=0)
def test_required_zero_without_consumers_counts_everything_as_read(
        driver, make_queue, project):
    queue = make_queue()
    posted = post_each(driver, queue, project, 'a', 'b')
    assert_reads(driver, queue, project, posted, [])
    assert claim(driver, queue, project) == (None, [])
    clean_all(driver, queue, project, 10)
    assert removed(driver, queue, project) == 2


@operator(consumers_required=0)
def test_required_zero_with_consumers_waits_for_all_of_them(
        driver, make_queue, project):
    queue = make_queue()
    first, second = (Reader(driver, queue, project) for _ in range(2))
    posted = post_each(driver, queue, project, 'a', 'b')
    at = positions(driver, queue, project)
    first.read_all()
    assert_reads(driver, queue, project, posted, ['a', 'b'])
    second.page(limit=1)
    second.page(str(at['a']))
    assert_reads(driver, queue, project, posted, ['b'])


@operator(consumers_required=1)
def test_a_message_read_by_all_stays_gone_when_its_consumer_leaves(
        driver, make_queue, project):
    queue = make_queue()
    reader = Reader(driver, queue, project)
    posted = post_each(driver, queue, project, 'a', 'b')
    at = positions(driver, queue, project)
    reader.page(limit=1)
    reader.page(str(at['a']))
    assert_reads(driver, queue, project, posted, ['b'])
    reader.remove()
    # P = 0 < 1 now: nothing more is read by all, but a stays gone.
    assert_reads(driver, queue, project, posted, ['b'])
    posted.update(post_each(driver, queue, project, 'c'))
    assert_reads(driver, queue, project, posted, ['b', 'c'])


@operator(consumers_required=1)
def test_claimed_messages_are_never_removed_by_read_by_all(
        driver, make_queue, project):
    queue = make_queue()
    reader = Reader(driver, queue, project)
    posted = post_each(driver, queue, project, 'a', 'b', 'c')
    claim_id, got = claim(driver, queue, project, limit=2)
    assert bodies(got) == ['a', 'b']
    reader.read_all()
    assert bodies(listed(driver, queue, project, include_claimed=True)) == [
        'a', 'b']
    clean_all(driver, queue, project, 10)
    assert removed(driver, queue, project) == 1
    assert bodies(driver.claim_controller.get(queue, claim_id,
                                              project=project)[1]) == [
        'a', 'b']
    messages = driver.message_controller
    messages.delete(queue, posted['a'], project=project, claim=claim_id)
    # Released, b is judged like the others: read by all, gone.
    driver.claim_controller.delete(queue, claim_id, project=project)
    assert_reads(driver, queue, project, posted, [])
    clean_all(driver, queue, project, 10)
    assert removed(driver, queue, project) == 2


@operator(consumers_required=1)
def test_a_deleted_queue_s_consumers_start_again_from_its_beginning(
        driver, make_queue, project):
    # Positions may start again from 1 in a queue created again, so a
    # cursor from before its deletion would skip (and, read by all,
    # remove) the new queue's messages: its consumers start afresh.
    queue = make_queue()
    reader = Reader(driver, queue, project)
    post(driver, queue, project, 'a', 'b', 'c', 'd', 'e')
    reader.read_all()
    assert reader.state().cursor is not None
    through_pipeline(driver).delete(queue, project=project)
    make_queue(name=queue)
    posted = post_each(driver, queue, project, 'x', 'y', 'z')
    # Swift's positions grow with time, so its cursors need no reset;
    # what every backend shows is the lag.
    assert reader.options()['lag'] == 3
    got, _ = reader.page()
    assert got == ['x', 'y', 'z']
    # Handed out, not acknowledged: nothing is read by all yet.
    assert_reads(driver, queue, project, posted, ['x', 'y', 'z'])
    assert bodies(claim(driver, queue, project)[1]) == ['x', 'y', 'z']
    clean_all(driver, queue, project, 10)
    assert removed(driver, queue, project) == 0


@pytest.mark.parametrize('operator_config', [
    '[retention]\nconsumers_required = 0\nconsumer_idle_time = 10\n'],
    ids=['required=0,idle=10'])
def test_a_consumer_idle_by_one_second_stops_pinning(
        driver, make_queue, project, clock):
    queue = make_queue()
    stuck = Reader(driver, queue, project)
    active = Reader(driver, queue, project)
    posted = post_each(driver, queue, project, 'a', 'b', ttl=3600)
    assert stuck.page(limit=1)[0] == ['a']         # active at t0
    clock.advance(5)
    active.read_all()                              # active at t5
    clock.advance(4)                               # t9: stuck idle for 9 s
    assert_reads(driver, queue, project, posted, ['a', 'b'])
    assert stuck.options()['idle'] is False
    clock.advance(1)                               # t10: idle 10 s
    assert stuck.options()['idle'] is True
    assert active.options()['idle'] is False
    assert_reads(driver, queue, project, posted, [])
    # It may resume: what went before it was handed out is lost to it
    # (b; a was handed to it once), and nothing read by all comes back.
    assert stuck.page() == ([], None)
    post(driver, queue, project, 'c', ttl=3600)
    assert stuck.page()[0] == ['c']
    assert stuck.state().lost == 1
    assert stuck.options()['idle'] is False


@operator(consumers_required=5)
def test_a_tenant_may_tighten_consumers_required(driver, make_queue,
                                                 project):
    queue = make_queue({'_retention': {'consumers_required': 1}})
    reader = Reader(driver, queue, project)
    posted = post_each(driver, queue, project, 'a', 'b')
    reader.page(limit=1)
    reader.page(str(positions(driver, queue, project)['a']))
    assert_reads(driver, queue, project, posted, ['b'])


@operator(consumers_required=5)
@pytest.mark.parametrize('loosened', [6, 1000])
def test_a_tenant_may_not_loosen_consumers_required(driver, project,
                                                    loosened):
    # Tried: requiring more consumers than the operator does, which would
    # keep messages longer (a tenant may only lower it, down to 0).
    queues = through_pipeline(driver)
    with pytest.raises(errors.InvalidInput) as raised:
        queues.create('q', metadata={'_retention': {
            'consumers_required': loosened}}, project=project)
    assert_named(raised.value, ['_retention.consumers_required',
                                str(loosened), '5'])
    assert not queues.exists('q', project=project)


def test_without_consumers_required_consumers_remove_nothing(
        driver, make_queue, project):
    queue = make_queue()
    reader = Reader(driver, queue, project)
    posted = post_each(driver, queue, project, 'a', 'b')
    reader.read_all()
    assert_reads(driver, queue, project, posted, ['a', 'b'])


# -- reports -----------------------------------------------------------------

def test_subscription_get_shows_the_consumer(driver, make_queue,
                                                     project, clock):
    queue = make_queue()
    reader = Reader(driver, queue, project)
    other = driver.subscription_controller.create(
        queue, 'http://127.0.0.1:9/x', 3600, {'k': 1}, project=project)
    assert reader.options() == {'cursor': None, 'lag': 0, 'lost': 0,
                                'last_active_age': 0, 'idle': False}
    post(driver, queue, project, 'a', 'b', 'c')
    at = positions(driver, queue, project)
    reader.page(limit=1)
    reader.page(str(at['a']), limit=1)
    clock.advance(7)
    assert reader.options() == {'cursor': str(at['a']), 'lag': 2, 'lost': 0,
                                'last_active_age': 7, 'idle': False}
    # The subscription list is not asked for the report: Zaqar's notifier
    # lists the subscriptions on every post, which must cost nothing per
    # consumer (a lag is a count).
    assert driver.subscription_controller.get(
        queue, other, project=project)['options'] == {'k': 1}


@operator(consumer_idle_time=10)
def test_stats_show_live_and_idle_consumers(driver, make_queue, project,
                                            clock):
    queue = make_queue()
    assert 'consumers' not in driver.message_controller.stats(
        queue, project)['retention']
    Reader(driver, queue, project)
    # Idle, its subscription (ttl 3600) still live: a backend whose
    # subscriptions expire on the store clock must still count it.
    clock.advance(10)
    fresh = Reader(driver, queue, project)
    fresh.page()
    assert driver.message_controller.stats(queue, project)['retention'][
        'consumers'] == {'live': 1, 'idle': 1}


def test_a_subscription_get_shows_the_report_the_list_does_not(
        driver, make_queue, project):
    """docs/usage.md: GET .../subscriptions/{id} merges the consumer's
    report into the options; the subscription list does not (Zaqar's
    notifier lists the subscriptions on every post, and lag is a
    count)."""
    queue = make_queue()
    reader = Reader(driver, queue, project)
    post(driver, queue, project, 'a', 'b', 'c')
    _, marker = reader.page(limit=1)
    reader.page(marker, limit=1)
    options = reader.options()
    assert (options['cursor'], options['lag'], options['lost']) == (
        marker, 2, 0)
    listed_subs = list(next(driver.subscription_controller.list(
        queue, project=project, with_consumers=True)))
    assert [s['subscriber'] for s in listed_subs] == [reader.subscriber]
    assert not {'cursor', 'lag', 'lost', 'last_active_age', 'idle'} & set(
        listed_subs[0]['options'])


def test_a_deleted_subscription_is_gone_from_the_report(driver, make_queue,
                                                        project):
    queue = make_queue()
    reader = Reader(driver, queue, project)
    reader.remove()
    with pytest.raises(storage_errors.SubscriptionDoesNotExist):
        reader.options()


# -- what lost counts (docs/usage.md, Persistent consumers) ------------------

def test_a_message_deleted_between_two_kept_ones_further_on_is_not_lost(
        driver, make_queue, project):
    """docs/usage.md: a message that goes from between two kept ones
    further on is not counted. Tried: the consumer was handed a; another
    client deletes c, beyond b (the next message it is handed); the
    consumer reads through in pages of two, so c's empty position falls
    inside a page. lost measures how far it fell behind, not every
    message it never saw: 0, though c never reached it."""
    queue = make_queue()
    reader = Reader(driver, queue, project)
    ids = post(driver, queue, project, 'a', 'b', 'c', 'd', 'e')
    got, marker = reader.page(limit=1)
    assert got == ['a']
    driver.message_controller.delete(queue, ids[2], project=project)
    read = []
    while True:
        got, marker = reader.page(marker, limit=2)
        if not got:
            break
        read += got
    assert read == ['b', 'd', 'e']
    assert reader.state().lost == 0
    assert reader.options()['lost'] == 0


def test_a_message_right_after_the_cursor_that_expires_is_lost(
        driver, make_queue, project, clock):
    """docs/usage.md: when the messages right after what the consumer was
    handed went before it got them (retention, ttl, another client's
    delete), the positions skipped are added to its lost. Tried with ttl
    alone (no retention): b, right after a (handed and acknowledged),
    runs out before the consumer lists again; its next page begins at c
    and b counts once, however often that page is handed."""
    queue = make_queue()
    reader = Reader(driver, queue, project)
    post(driver, queue, project, 'a')
    post(driver, queue, project, 'b', ttl=60)
    post(driver, queue, project, 'c')
    got, marker = reader.page(limit=1)
    assert got == ['a']
    clock.advance(61)
    assert bodies(listed(driver, queue, project)) == ['a', 'c']
    got, marker_c = reader.page(marker)
    assert got == ['c']
    assert reader.state().lost == 1
    # Handed again (not acknowledged): not counted twice.
    assert reader.page()[0] == ['c']
    reader.page(marker_c)
    assert reader.options()['lost'] == 1


def test_two_requests_of_one_page_at_once_count_lost_once(
        driver, make_queue, project):
    """A consumer whose GET timed out retries it while the first is still
    being served (or runs two connections): both read the same stored
    state and hand the same page, whose gap counts once. Redis added the
    loss only when ``handed`` moved forward; MongoDB and Swift counted
    it twice."""
    queue = make_queue()
    reader = Reader(driver, queue, project)
    ids = post(driver, queue, project, 'a', 'b', 'c')
    got, marker = reader.page(limit=1)
    assert got == ['a']
    # b goes (another client deletes it) before the consumer gets it.
    driver.message_controller.delete(queue, ids[1], project=project)
    messages = driver.message_controller
    _, stale = messages._consumer(queue, project, str(reader.id))
    # Both requests read the state before either stores its update.
    first = messages._consumer_page(queue, project, stale, int(marker), 10)
    second = messages._consumer_page(queue, project, stale, int(marker),
                                     10)
    assert [m['body'] for m in first[0]] == ['c']
    assert [m['body'] for m in second[0]] == ['c']
    assert reader.state().lost == 1


def test_resubscribing_after_the_subscription_ran_out_starts_afresh(
        driver, make_queue, project, clock, monkeypatch):
    """docs/usage.md: "Deleting the subscription (or its ttl running out)
    removes the consumer". On Swift a subscription whose ttl ran out left
    its consumer's state (expiry writes no tombstone), and the consumer
    subscribed again inherited the old cursor, handed and lost."""
    queue = make_queue()
    subs = driver.subscription_controller
    reader = Reader.__new__(Reader)
    reader.driver, reader.queue, reader.project = driver, queue, project
    reader.id = uuid.uuid4()
    reader.subscriber = 'cursor:' + str(reader.id)
    reader.sid = subs.create(queue, reader.subscriber, 1, {},
                             project=project)
    ids = post(driver, queue, project, 'a', 'b', 'c', ttl=3600)
    got, marker = reader.page(limit=2)
    assert got == ['a', 'b']
    reader.page(marker, limit=1)                   # cursor b, handed c
    driver.message_controller.delete(queue, ids[0], project=project)
    # The subscription's ttl (1 s) runs out: on the store's clock
    # (MongoDB, Redis scripts; past Redis' registration grace too), in
    # Redis itself (real EXPIRE) and on the API node's wall clock (Swift).
    time.sleep(2.2)
    clock.advance(120)
    real_time = time.time
    monkeypatch.setattr(time, 'time', lambda: real_time() + 120)
    assert subs.create(queue, reader.subscriber, 3600, {},
                       project=project) is not None
    state = reader.state()
    assert (state.cursor, state.handed, state.lost) == (None, None, 0)
    assert reader.page()[0] == ['b', 'c']
