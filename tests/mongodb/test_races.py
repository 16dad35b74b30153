"""MongoDB: forced interleavings of operations that race in production.

Each test wraps one collection method so that a second operation runs at
the exact point between two steps of the first (the clock fixture sets the
"now" each operation reads), then checks the contract still holds.
"""

import pytest
from zaqar.storage import errors as storage_errors

from tests.contract.helpers import CLIENT, claim, listed, post, stats
from zaqar_delay import errors
from zaqar_delay import rules
from zaqar_delay.drivers.mongodb import claims
from zaqar_delay.drivers.mongodb import fields
from zaqar_delay.drivers.mongodb import state


def before_call(monkeypatch, collection, method, action, when=None):
    """Run ``action()`` once, just before the first call of
    ``collection.method`` whose arguments satisfy ``when``."""
    real = getattr(collection, method)
    fired = []

    def hooked(*args, **kwargs):
        if not fired and (when is None or when(*args, **kwargs)):
            fired.append(True)
            action()
        return real(*args, **kwargs)

    monkeypatch.setattr(collection, method, hooked)
    return fired


def before_hand_out(monkeypatch, driver, action):
    """Run ``action()`` once, just before a claim's conditional update
    takes its candidates: an ``update_many``, or a ``find_one_and_update``
    for a single candidate (claims.py)."""
    fired = []

    def once():
        if not fired:
            fired.append(True)
            action()

    def hands_out(where, update, **kwargs):
        return '$inc' in update
    for method in ('update_many', 'find_one_and_update'):
        before_call(monkeypatch, driver.messages, method, once,
                    when=hands_out)
    return fired


def test_a_renew_racing_settle_never_succeeds_for_lost_messages(
        driver, project, clock, monkeypatch):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a', 'b')
    claim_id, got = claim(driver, 'q', project, ttl=60)
    assert len(got) == 2
    renewed = []

    def renew_started_before_expiry():
        # The renew read "now" just before the claim expired; its update
        # lands between settle's "give back messages" and "delete claims".
        clock.advance(-2)
        try:
            driver.claim_controller.update(
                'q', claim_id, {'ttl': 300, 'grace': 0}, project=project)
            renewed.append(True)
        except storage_errors.ClaimDoesNotExist:
            renewed.append(False)
        clock.advance(2)

    fired = before_call(monkeypatch, driver.claims, 'delete_many',
                        renew_started_before_expiry)
    clock.advance(61)
    state.settle(driver, 'q', project, driver.now())
    assert fired
    _, other = claim(driver, 'q', project)
    if renewed == [True]:
        # A successful renew keeps its messages: nobody else gets them.
        assert other == []
        assert len(driver.claim_controller.get(
            'q', claim_id, project=project)[1]) == 2
    else:
        assert sorted(m['body'] for m in other) == ['a', 'b']


@pytest.mark.parametrize('limit', [2, 1], ids=['update_many',
                                               'findAndModify'])
def test_messages_taken_by_a_claim_settled_meanwhile_come_back(
        driver, project, clock, monkeypatch, limit):
    # A claim of 2 learns that its claim ended from its joined read-back,
    # a claim of 1 from its separate check (claims.py, _take_ready).
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a', 'b')

    def claim_ends_before_its_messages_are_taken():
        # The claimer stalls after writing its claim document; its ttl
        # runs out and another operation settles the queue meanwhile.
        clock.advance(61)
        state.settle(driver, 'q', project, driver.now())

    fired = before_hand_out(monkeypatch, driver,
                            claim_ends_before_its_messages_are_taken)
    assert claim(driver, 'q', project, ttl=60, limit=limit)[1] == []
    assert fired
    monkeypatch.undo()
    clock.advance(120)
    driver.gc()
    _, again = claim(driver, 'q', project)
    assert sorted(m['body'] for m in again) == ['a', 'b']


@pytest.mark.parametrize('limit', [2, 1], ids=['batch', 'one'])
def test_a_pop_whose_claim_was_settled_before_it_took_its_messages(
        driver, project, clock, monkeypatch, limit):
    """A pop of 2 learns from its joined read-back that its claim ended
    and gives the messages back: its delete's count could not tell which
    were still its own. A pop of 1 sends no such read: its delete, under
    its claim, removed the message, which nobody else can have held
    (claims.py, take), so it is the pop's."""
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a', 'b')

    def claim_ends_before_its_messages_are_taken():
        clock.advance(claims.POP_CLAIM_TTL + 1)
        state.settle(driver, 'q', project, driver.now())

    fired = before_hand_out(monkeypatch, driver,
                            claim_ends_before_its_messages_are_taken)
    popped = driver.message_controller.pop('q', limit, project=project)
    assert fired
    monkeypatch.undo()
    clock.advance(120)
    driver.gc()
    _, left = claim(driver, 'q', project)
    if limit == 2:
        assert popped == []
        assert sorted(m['body'] for m in left) == ['a', 'b']
    else:
        assert [m['body'] for m in popped] == ['a']
        assert [m['body'] for m in left] == ['b']


def test_messages_of_a_vanished_claim_are_given_back_by_gc(driver, project,
                                                           clock):
    """A claimer that died after handing out, before checking its claim:
    nothing but gc can find its messages."""
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a')
    claim_id, _ = claim(driver, 'q', project, ttl=60)
    driver.claims.delete_one({'_id': claim_id})
    clock.advance(61)
    assert claim(driver, 'q', project)[1] == []
    clock.advance(state.ORPHAN_AGE_MS // 1000)
    driver.gc()
    assert [m['body'] for m in claim(driver, 'q', project)[1]] == ['a']


def test_a_post_racing_a_queue_purge_is_stored_not_dropped(
        driver, project, monkeypatch):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'old-1', 'old-2')

    def purge_and_post_again():
        # The first post has its positions; the queue is purged and
        # another post takes the same positions from a fresh counter.
        driver.message_controller._purge_queue('q', project)
        monkeypatch.undo()
        post(driver, 'q', project, 'other-1', 'other-2', 'other-3',
             'other-4')

    before_call(monkeypatch, driver.messages, 'insert_many',
                purge_and_post_again)
    ids = post(driver, 'q', project, 'racing-1', 'racing-2')
    stored = driver.message_controller.bulk_get('q', ids, project=project)
    assert sorted(m['body'] for m in stored) == ['racing-1', 'racing-2']
    assert sorted(m['body'] for m in listed(driver, 'q', project)) == [
        'other-1', 'other-2', 'other-3', 'other-4', 'racing-1', 'racing-2']


def test_a_retried_post_is_still_stored_once(driver, project):
    driver.queue_controller.create('q', project=project)
    ids = post(driver, 'q', project, 'once')
    doc = driver.messages.raw.find_one({'_id': ids[0]})
    again = rules.NewMessage(id=ids[0], ttl=300, delay=0, body='once',
                             body_json='"once"', group=None)
    driver.message_controller._insert('q', project, [again], str(CLIENT))
    assert [m['id'] for m in listed(driver, 'q', project)] == ids
    assert driver.messages.raw.find_one({'_id': ids[0]}) == doc


def test_stats_counts_groups_without_fetching_every_group_id(
        driver, project, monkeypatch):
    driver.queue_controller.create(
        'q', metadata={'_message_group_key': 'g'}, project=project)
    for n in range(3):
        post(driver, 'q', project, {'g': n}, {'g': n})
    claim(driver, 'q', project, limit=2)

    def distinct(*args, **kwargs):
        raise AssertionError('distinct returns every group id in one '
                             'reply, past 16 MB on a large queue')

    monkeypatch.setattr(driver.messages, 'distinct', distinct)
    found = stats(driver, 'q', project)
    assert (found['groups'], found['groups_in_flight']) == (3, 2)


def is_pop_delete(where, *args, **kwargs):
    return fields.CLAIM in where


def outlast_the_pop_claim(driver, project, clock, then=None):
    """The pop stalls before its delete past its claim's ttl; another
    consumer claims its message (the claim settles the queue first, so
    the pop's claim ends and gives it back), then ``then(claim id)``."""
    def run():
        clock.advance(claims.POP_CLAIM_TTL + 1)
        claim_id, got = claim(driver, 'q', project)
        assert [m['body'] for m in got] == ['a']
        if then is not None:
            then(claim_id)
    return run


def test_a_pop_outlasting_its_claim_never_returns_what_another_holds(
        driver, project, clock, monkeypatch):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a')
    fired = before_call(monkeypatch, driver.messages, 'delete_many',
                        outlast_the_pop_claim(driver, project, clock),
                        when=is_pop_delete)
    popped = driver.message_controller.pop('q', 10, project=project)
    assert fired
    assert popped == []
    held = listed(driver, 'q', project, include_claimed=True)
    assert [(m['body'], m['claim_id'] is not None) for m in held] == [
        ('a', True)]


def test_a_pop_whose_retried_delete_outlasts_its_claim_fails(
        driver, project, clock, monkeypatch):
    """The first delete's reply is lost (it did nothing); before the
    retry, another consumer claims and deletes the message: gone, but
    not by this pop, which cannot tell and must not return it."""
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a')
    real = driver.messages.delete_many
    ids = [m['id'] for m in listed(driver, 'q', project)]
    calls = []

    def other_consumer_deletes(claim_id):
        driver.message_controller.delete('q', ids[0], project=project,
                                         claim=claim_id)

    meanwhile = outlast_the_pop_claim(driver, project, clock,
                                      other_consumer_deletes)

    def delete_many(where, *args, **kwargs):
        if is_pop_delete(where) and not calls:
            calls.append(True)
            meanwhile()
            raise errors.BackendUnavailable(backend='MongoDB',
                                            reason='reply lost')
        return real(where, *args, **kwargs)

    monkeypatch.setattr(driver.messages, 'delete_many', delete_many)
    with pytest.raises(errors.BackendUnavailable):
        driver.message_controller.pop('q', 10, project=project)
    assert calls
    assert listed(driver, 'q', project, include_claimed=True) == []


@pytest.fixture(autouse=True)
def _clock(clock):
    """Every test here moves time."""


def test_stats_racing_the_last_delete_still_names_the_newest(
        driver, project, monkeypatch):
    """Stats reads the oldest message, then the newest: a delete landing
    in between (the queue's last message) must not fail stats."""
    driver.queue_controller.create('q', project=project)
    [mid] = post(driver, 'q', project, 'a')
    controller = driver.message_controller
    real = controller._any

    def deleted_after_the_oldest(queue, project_, now, sort, kept):
        found = real(queue, project_, now, sort, kept)
        if sort == 1:
            controller.delete('q', mid, project=project)
        return found

    monkeypatch.setattr(controller, '_any', deleted_after_the_oldest)
    counts = stats(driver, 'q', project)
    assert counts['oldest']['id'] == counts['newest']['id'] == mid
