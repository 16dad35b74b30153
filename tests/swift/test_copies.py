"""Copies on Swift (dead letters, moved groups, zaqar-delay-migrate's
carry_in) keep their ids, so a call cut short and made again finds part
of its batch stored: the batch must still keep its order, lose nothing
and store nothing twice (posts._store_copies)."""

import uuid

import pytest

from tests.contract.helpers import bodies, claim, listed
from tests.contract.test_queue_stage import through_pipeline
from zaqar_delay import rules
from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import posts


def copies(*numbers, ids=None):
    """Copies with bodies ``numbers``; ``ids`` ({number: id}) keeps the
    ids from one call to the next."""
    ids = {} if ids is None else ids
    return [rules.NewMessage(
        id=ids.setdefault(n, str(uuid.uuid4())), ttl=3600, delay=0,
        body=n, body_json=str(n)) for n in numbers]


def cut_short(driver, queue, project, batch, stored, monkeypatch):
    """carry_in of ``batch`` dying while it stores: only the messages at
    ``stored`` (indexes) got their ``m/``; none got its ``r/`` marker."""
    real = posts._store_copy
    wanted = {batch[i].id for i in stored}

    def dies_midway(qs, message, **kwargs):
        if message.id not in wanted:
            raise RuntimeError('API node died')
        return real(qs, message, **kwargs)

    monkeypatch.setattr(posts, '_store_copy', dies_midway)
    with pytest.raises(RuntimeError, match='died'):
        driver.message_controller.carry_in(queue, project, batch, 'c')
    monkeypatch.setattr(posts, '_store_copy', real)


@pytest.mark.parametrize('with_markers', [False, True],
                         ids=['died-before-markers', 'markers-written'])
def test_a_batch_cut_short_midway_keeps_its_order_when_made_again(
        driver, make_queue, project, monkeypatch, with_markers):
    """Messages 0 and 2 of 0-3 were stored when the call died (with or
    without their r/ markers). Made again, 1 and 3 must not go after 2:
    1 takes its own position of the call cut short, between 0 and 2."""
    queue = make_queue()
    ids = {}
    cut_short(driver, queue, project, copies(0, 1, 2, 3, ids=ids), [0, 2],
              monkeypatch)
    qs = driver.queue_state(queue, project)
    if with_markers:
        for n in (0, 2):
            driver.store.put(qs.c, names.received_obj(ids[n]))
    assert listed(driver, queue, project) == [], 'drafts are not seen'
    driver.message_controller.carry_in(queue, project,
                                       copies(0, 1, 2, 3, ids=ids), 'c')
    assert bodies(listed(driver, queue, project)) == [0, 1, 2, 3]
    assert [m['id'] for m in listed(driver, queue, project)] == [
        ids[n] for n in range(4)]
    # Made a third time: nothing is stored twice.
    driver.message_controller.carry_in(queue, project,
                                       copies(0, 1, 2, 3, ids=ids), 'c')
    assert bodies(listed(driver, queue, project)) == [0, 1, 2, 3]
    assert driver.message_controller.stats(queue, project)[
        'messages']['total'] == 4


def test_a_copy_stored_by_another_batch_is_kept_and_the_rest_follow(
        driver, make_queue, project):
    """A message stored by an earlier, different batch keeps its place;
    one before it in this batch cannot take a position of a call cut
    short (there was none): it goes after the last position, stored
    once, none lost."""
    queue = make_queue()
    ids = {}
    messages = driver.message_controller
    messages.carry_in(queue, project, copies(1, ids=ids), 'c')
    messages.carry_in(queue, project, copies(0, 1, ids=ids), 'c')
    assert bodies(listed(driver, queue, project)) == [1, 0]


def test_a_copy_its_consumer_deleted_is_not_stored_again(
        driver, make_queue, project):
    queue = make_queue()
    ids = {}
    messages = driver.message_controller
    messages.carry_in(queue, project, copies(0, 1, ids=ids), 'c')
    messages.delete(queue, ids[0], project=project)
    messages.carry_in(queue, project, copies(0, 1, 2, ids=ids), 'c')
    assert bodies(listed(driver, queue, project)) == [1, 2]


def test_a_consumed_copys_marker_outlives_the_copy(driver, make_queue,
                                                   project):
    """docs/migration.md: the r/ marker that keeps a consumed copy from
    coming back lasts RECEIVED_MEMORY_S (15 minutes) past the copy's
    expiry, so a move run again after the message expired in its source
    cannot bring it back either."""
    queue = make_queue()
    ids = {}
    driver.message_controller.carry_in(queue, project,
                                       copies(0, ids=ids), 'c')
    qs = driver.queue_state(queue, project)
    message = driver.store.head(qs.c, names.message_obj(ids[0]))
    marker = driver.store.head(qs.c, names.received_obj(ids[0]))
    # X-Delete-At is in seconds and rounded up, with the expiry margin.
    expires_s = int(message['x-object-meta-e']) // 1000 + 1 + \
        driver.store_conf.expiry_margin
    assert int(marker['x-delete-at']) - expires_s == names.RECEIVED_MEMORY_S


def test_deleting_the_queue_forgets_what_was_copied_into_it(
        driver, make_queue, project):
    """docs/migration.md: a move run again into a queue deleted and
    created again brings its messages back."""
    queue = make_queue()
    ids = {}
    messages = driver.message_controller
    messages.carry_in(queue, project, copies(0, ids=ids), 'c')
    messages.delete(queue, ids[0], project=project)
    messages.carry_in(queue, project, copies(0, ids=ids), 'c')
    assert listed(driver, queue, project) == [], 'consumed: not again'
    queues = through_pipeline(driver)
    queues.delete(queue, project=project)
    queues.create(queue, project=project)
    messages.carry_in(queue, project, copies(0, ids=ids), 'c')
    assert bodies(listed(driver, queue, project)) == [0]


def gc_queue(driver, queue, project):
    driver._gc_queue(driver.queue_state(queue, project).c)


def test_a_copy_being_stored_is_no_draft_however_old_its_message(
        driver, make_queue, project, monkeypatch, clock):
    """A copy keeps its age: a message an hour old, stored a moment ago
    and not filed yet (its call still at work, or cut short), is young
    as a draft. gc's draft removal goes by when its ``p/`` was written,
    not by the message's age, so it leaves it for 60 s."""
    queue = make_queue()
    ids = {}
    old = [m._replace(age_ms=3_600_000, ttl=7200)
           for m in copies(0, 1, ids=ids)]
    cut_short(driver, queue, project, old, [0], monkeypatch)
    qs = driver.queue_state(queue, project)
    gc_queue(driver, queue, project)
    assert driver.store.head(qs.c, names.message_obj(ids[0])) is not None
    assert len(driver.store.listing_all(qs.c, 'p/')) == 2
    clock.advance(61)
    gc_queue(driver, queue, project)
    assert driver.store.listing_all(qs.c, 'p/') == []
    assert driver.store.head(qs.c, names.message_obj(ids[0])) is None


def named(driver, queue, project):
    """The ids the queue's p/ entries name, in position order."""
    qs = driver.queue_state(queue, project)
    return [names.position_fields(e)['id']
            for e in driver.store.listing_all(qs.c, 'p/')]


def test_a_batch_made_again_takes_back_every_position_it_had(
        driver, make_queue, project, monkeypatch):
    """Made again after storing 0 of 0-2, the call takes back the
    positions of 1 and 2 too: none is left behind naming their ids."""
    queue = make_queue()
    ids = {}
    cut_short(driver, queue, project, copies(0, 1, 2, ids=ids), [0],
              monkeypatch)
    driver.message_controller.carry_in(queue, project,
                                       copies(0, 1, 2, ids=ids), 'c')
    assert named(driver, queue, project) == [ids[n] for n in range(3)]


def test_a_position_left_by_a_call_cut_short_keeps_a_consumed_copy_gone(
        driver, make_queue, project, monkeypatch, clock):
    """A call cut short before it stored any copy leaves positions that
    one made again cannot place (nothing tells where the batch was): it
    takes new ones. Once a copy is consumed, gc removes its old position
    as a draft: the position only, not the copy's r/ marker, so a move
    run again does not bring back what its consumer deleted."""
    queue = make_queue()
    ids = {}
    cut_short(driver, queue, project, copies(0, 1, 2, ids=ids), [],
              monkeypatch)
    messages = driver.message_controller
    messages.carry_in(queue, project, copies(0, 1, 2, ids=ids), 'c')
    assert bodies(listed(driver, queue, project)) == [0, 1, 2]
    assert named(driver, queue, project).count(ids[1]) == 2
    messages.delete(queue, ids[1], project=project)
    clock.advance(61)
    gc_queue(driver, queue, project)
    qs = driver.queue_state(queue, project)
    assert driver.store.head(qs.c, names.received_obj(ids[1])) is not None
    assert ids[1] not in named(driver, queue, project)
    messages.carry_in(queue, project, copies(0, 1, 2, ids=ids), 'c')
    assert bodies(listed(driver, queue, project)) == [0, 2]


def test_a_position_left_behind_never_takes_its_claimed_copy_with_it(
        driver, make_queue, project, monkeypatch, clock):
    """The position a call cut short left for a copy stored again
    elsewhere keeps the copy's first expiry; a claim moves the copy's
    own past it. gc must not take the old position's expiry for the
    copy's and remove the claimed message: the position alone goes."""
    queue = make_queue()
    ids = {}
    batch = [m._replace(ttl=60) for m in copies(0, ids=ids)]
    cut_short(driver, queue, project, batch + copies(1, ids=ids), [],
              monkeypatch)
    messages = driver.message_controller
    messages.carry_in(queue, project, batch, 'c')
    claim_id, got = claim(driver, queue, project, ttl=300, grace=60)
    assert [m['id'] for m in got] == [ids[0]]
    clock.advance(61)
    gc_queue(driver, queue, project)
    assert named(driver, queue, project).count(ids[0]) == 1
    [held] = listed(driver, queue, project, include_claimed=True)
    assert held['id'] == ids[0]
    messages.delete(queue, ids[0], project=project, claim=claim_id)
    assert listed(driver, queue, project, include_claimed=True) == []


def test_gc_dying_while_it_removes_a_draft_copy_leaves_no_lone_marker(
        driver, make_queue, project, monkeypatch, clock):
    """A copy cut short (stored with its marker, not filed) is a draft
    after 60 s. gc deletes its r/ marker before the message: dying in
    between leaves the message, removed by the next pass, never a marker
    without its message, which would pass for a consumed copy (skipped
    by the next copy of it, and counted consumed by a migration's
    verify)."""
    queue = make_queue()
    ids = {}
    cut_short(driver, queue, project, copies(0, 1, ids=ids), [0],
              monkeypatch)
    qs = driver.queue_state(queue, project)
    driver.store.put(qs.c, names.received_obj(ids[0]))
    clock.advance(61)
    real_remove = type(qs).remove

    def dies(self, *args, **kwargs):
        raise RuntimeError('gc died')

    monkeypatch.setattr(type(qs), 'remove', dies)
    with pytest.raises(RuntimeError, match='gc died'):
        gc_queue(driver, queue, project)
    monkeypatch.setattr(type(qs), 'remove', real_remove)
    assert driver.store.head(qs.c, names.received_obj(ids[0])) is None
    assert driver.store.head(qs.c, names.message_obj(ids[0])) is not None
    gc_queue(driver, queue, project)
    assert driver.store.head(qs.c, names.message_obj(ids[0])) is None
    driver.message_controller.carry_in(queue, project,
                                       copies(0, 1, ids=ids), 'c')
    assert bodies(listed(driver, queue, project)) == [0, 1]


def test_a_dead_letter_leaving_drops_its_marker_before_it_goes(
        driver, make_queue, project, monkeypatch, clock):
    """A message that arrived as a copy and is dead-lettered forgets its
    r/ marker here before it is removed: dying in between must not leave
    a marker that would skip it were it moved back."""
    dlq = make_queue()
    queue = make_queue({'_max_claim_count': 1, '_dead_letter_queue': dlq})
    ids = {}
    driver.message_controller.carry_in(queue, project, copies(0, ids=ids),
                                       'c')
    qs = driver.queue_state(queue, project)
    assert driver.store.head(qs.c, names.received_obj(ids[0])) is not None
    claim(driver, queue, project, ttl=60)
    clock.advance(61)
    real_remove = type(qs).remove

    def dies(self, victims, *args, **kwargs):
        if self.c == qs.c and any(v[0] == ids[0] for v in victims):
            raise RuntimeError('node died')
        return real_remove(self, victims, *args, **kwargs)

    monkeypatch.setattr(type(qs), 'remove', dies)
    with pytest.raises(RuntimeError, match='node died'):
        claim(driver, queue, project)
    assert driver.store.head(qs.c, names.received_obj(ids[0])) is None


def test_gc_meanwhile_leaves_a_copy_made_again_whole(
        driver, make_queue, project, monkeypatch, clock):
    """Made again a minute after it was cut short, a call reuses that
    call's positions, which were written then. It writes them again
    first: gc running while it stores (here: right before its m/ PUTs)
    must not take the copies it adopts or places for drafts and remove
    them under it."""
    queue = make_queue()
    ids = {}
    cut_short(driver, queue, project, copies(0, 1, 2, ids=ids), [0],
              monkeypatch)
    clock.advance(61)
    real = posts._store_copy

    def gc_first(qs, message, **kwargs):
        gc_queue(driver, queue, project)
        return real(qs, message, **kwargs)

    monkeypatch.setattr(posts, '_store_copy', gc_first)
    driver.message_controller.carry_in(queue, project,
                                       copies(0, 1, 2, ids=ids), 'c')
    monkeypatch.setattr(posts, '_store_copy', real)
    assert bodies(listed(driver, queue, project)) == [0, 1, 2]


def test_a_copy_made_again_keeps_the_expiry_its_claim_moved(
        driver, make_queue, project, clock):
    """A copy made again finds the copy stored (a move or migration run
    again) and writes its position again: with the expiry stored now,
    which its claim moved past the one the copy arrives with, so gc does
    not remove it, claimed, at the first."""
    queue = make_queue()
    ids = {}
    batch = [m._replace(ttl=60) for m in copies(0, ids=ids)]
    messages = driver.message_controller
    messages.carry_in(queue, project, batch, 'c')
    claim_id, got = claim(driver, queue, project, ttl=300, grace=60)
    assert [m['id'] for m in got] == [ids[0]]
    messages.carry_in(queue, project, batch, 'c')
    clock.advance(61)
    gc_queue(driver, queue, project)
    [held] = listed(driver, queue, project, include_claimed=True)
    assert held['id'] == ids[0]
    messages.delete(queue, ids[0], project=project, claim=claim_id)


def test_gc_leaves_the_positions_of_a_copy_still_being_stored(
        driver, make_queue, project, monkeypatch, clock):
    """A call cut short before it stored anything left a position naming
    the copy; the call made again took a new one and has not stored the
    copy yet when gc runs: with no m/ to tell which position is the
    copy's, gc leaves both (drafts wait 60 s), and the copy is listed."""
    queue = make_queue()
    ids = {}
    cut_short(driver, queue, project, copies(0, ids=ids) + copies(1),
              [], monkeypatch)
    real = posts._store_copy

    def gc_first(qs, message, **kwargs):
        gc_queue(driver, queue, project)
        return real(qs, message, **kwargs)

    monkeypatch.setattr(posts, '_store_copy', gc_first)
    driver.message_controller.carry_in(queue, project, copies(0, ids=ids),
                                       'c')
    monkeypatch.setattr(posts, '_store_copy', real)
    assert bodies(listed(driver, queue, project)) == [0]
    assert driver.message_controller.stats(queue, project)[
        'messages']['total'] == 1
