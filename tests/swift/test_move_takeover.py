"""A Swift group move that gc takes over while its mover is slow, stalled
or dead: gc finishes a move whose lock went unrenewed for 60 s, and the
mover may wake up and carry on. The group still reaches the target once
and in order, and members posted after the move began stay behind.

Interleavings are driven by wrapping the driver's own steps; the test
clock moves instead of the tests waiting."""

import uuid

import pytest

from tests.contract.helpers import claim, listed, post
from zaqar_delay import errors
from zaqar_delay.drivers.swift import group_admin
from zaqar_delay.drivers.swift import posts

GROUPED = {'_message_group_key': 'g'}


def queues(make_queue):
    # gc visits queue containers in name order: the source first.
    tag = uuid.uuid4().hex[:6]
    return (make_queue(GROUPED, name='a-src-' + tag),
            make_queue(GROUPED, name='z-tgt-' + tag))


def drain(driver, queue, project):
    """Claim and delete until nothing is left; ids in hand-out order."""
    out = []
    for _ in range(50):
        claim_id, got = claim(driver, queue, project)
        if not got:
            return out
        for m in got:
            out.append(m['id'])
            driver.message_controller.delete(queue, m['id'], project=project,
                                             claim=claim_id)
    raise AssertionError('still handing out after 50 claims')


def test_gc_finishing_a_move_leaves_members_posted_after_it_began(
        driver, make_queue, project, clock, monkeypatch):
    """The move's lock did not say where the group ended when it began:
    gc finishing it also moved a member posted later, which the mover
    leaves here as the group's new head (so it could be handed out here
    and there)."""
    queue, target = queues(make_queue)
    moved = post(driver, queue, project, {'g': 'a', 'n': 0},
                 {'g': 'a', 'n': 1}, ttl=3600)
    monkeypatch.setattr(group_admin, 'transfer', lambda *a, **k: 0)
    driver.message_controller.move_group(queue, 'a', target,
                                         project=project)  # locks, dies
    monkeypatch.undo()
    [late] = post(driver, queue, project, {'g': 'a', 'n': 'late'},
                  ttl=3600)
    clock.advance(120)
    driver.gc()
    assert drain(driver, target, project) == moved
    assert drain(driver, queue, project) == [late]


def test_a_move_that_goes_on_renews_its_lock(driver, make_queue, project,
                                             clock, monkeypatch):
    """A move of many pages outlasts gc's 60 s patience while it makes
    progress: its lock is renewed before each page, so gc leaves it to
    its mover rather than finishing it at the same time."""
    monkeypatch.setattr(group_admin, 'MOVE_BATCH', 3)
    queue, target = queues(make_queue)
    ids = post(driver, queue, project,
               *[{'g': 'a', 'n': n} for n in range(8)], ttl=3600)
    real_copy, finish, taken_over = (group_admin._copy,
                                     group_admin.finish_move, [])

    def slow_copy(*args, **kwargs):
        clock.advance(45)       # 135 s over the three pages
        driver.gc()
        return real_copy(*args, **kwargs)

    monkeypatch.setattr(group_admin, '_copy', slow_copy)
    monkeypatch.setattr(group_admin, 'finish_move',
                        lambda *args: taken_over.append(args) or finish(
                            *args))
    assert driver.message_controller.move_group(
        queue, 'a', target, project=project) == 8
    assert taken_over == []
    monkeypatch.undo()
    assert drain(driver, target, project) == ids


def test_gc_copying_a_batch_stored_in_part_keeps_it_in_place(
        driver, make_queue, project, clock, monkeypatch):
    """The mover's copy of its second page (a3 a4 a5) stored a4 and a5,
    not a3 (one PUT failed). gc's copy puts the head, copied with the
    first page, before the page ([a0 a3 a4]), so its positions did not
    line up with those of the copy cut short: a3 went after a5."""
    monkeypatch.setattr(group_admin, 'MOVE_BATCH', 3)
    queue, target = queues(make_queue)
    ids = post(driver, queue, project,
               *[{'g': 'a', 'n': n} for n in range(8)], ttl=3600)
    real_put, failed = posts._put_message, []

    def put(qs, message, exclusive):
        if message.id == ids[3] and not failed and qs.c.endswith(target):
            failed.append(message.id)
            raise errors.BackendUnavailable(backend='Swift',
                                            reason='503 on one PUT')
        return real_put(qs, message, exclusive)

    monkeypatch.setattr(posts, '_put_message', put)
    with pytest.raises(errors.BackendUnavailable):
        driver.message_controller.move_group(queue, 'a', target,
                                             project=project)
    assert failed == [ids[3]]
    clock.advance(120)
    driver.gc()
    assert [m['id'] for m in listed(driver, target, project)] == ids
    assert drain(driver, target, project) == ids


def test_a_stalled_mover_stores_nothing_the_target_consumed_meanwhile(
        driver, make_queue, project, clock, monkeypatch):
    """The mover found its copy not yet in the target, then stalled
    before storing it; gc took the move over, and a consumer claimed and
    deleted the copy in the target. The mover's store then succeeded
    (nothing under that id any more) and filed it again: handed out
    twice."""
    queue, target = queues(make_queue)
    [a0] = post(driver, queue, project, {'g': 'a', 'n': 0}, ttl=3600)
    real_put, consumed, stalled = posts._put_message, [], []

    def put(qs, message, exclusive):
        if message.id == a0 and qs.c.endswith(target) and not stalled:
            stalled.append(a0)      # gc's own copy goes through
            clock.advance(120)
            driver.gc()
            consumed.extend(drain(driver, target, project))
        return real_put(qs, message, exclusive)

    monkeypatch.setattr(posts, '_put_message', put)
    driver.message_controller.move_group(queue, 'a', target,
                                         project=project)
    monkeypatch.undo()
    assert consumed == [a0]
    assert drain(driver, target, project) == []
    assert listed(driver, queue, project, include_claimed=True) == []


def test_a_stalled_mover_keeps_its_copy_that_gc_filed(
        driver, make_queue, project, clock, monkeypatch):
    """The mover stored its copy, then stalled; gc took the move over,
    found that copy stored, filed it and wrote its marker. The mover,
    waking, must not take that marker for another call's copy consumed
    meanwhile (and delete the message gc filed)."""
    queue, target = queues(make_queue)
    [a0] = post(driver, queue, project, {'g': 'a', 'n': 0}, ttl=3600)
    real_put, stalled = posts._put_message, []

    def put(qs, message, exclusive):
        created = real_put(qs, message, exclusive)
        if message.id == a0 and qs.c.endswith(target) and not stalled:
            stalled.append(created)
            clock.advance(120)
            driver.gc()
        return created

    monkeypatch.setattr(posts, '_put_message', put)
    driver.message_controller.move_group(queue, 'a', target,
                                         project=project)
    monkeypatch.undo()
    assert stalled == [True]
    assert listed(driver, queue, project, include_claimed=True) == []
    assert drain(driver, target, project) == [a0]
