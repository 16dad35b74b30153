"""Copies on Swift (dead letters, moved groups, zaqar-delay-migrate's
carry_in) keep their ids, so a call cut short and made again finds part
of its batch stored: the batch must still keep its order, lose nothing
and store nothing twice (posts._store_copies)."""

import uuid

import pytest

from tests.contract.helpers import bodies, listed
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

    def dies_midway(qs, message):
        if message.id not in wanted:
            raise RuntimeError('API node died')
        return real(qs, message)

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
    assert int(marker['x-delete-at']) - int(message['x-delete-at']) == \
        names.RECEIVED_MEMORY_S


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
