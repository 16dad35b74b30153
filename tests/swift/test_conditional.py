"""If-None-Match on Swift: conflicts, lost replies and retried posts."""

import threading

import pytest

from tests.contract.helpers import CLIENT, bodies, claim, listed, post
from zaqar_delay import errors
from zaqar_delay import rules
from zaqar_delay.drivers.swift import connection
from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import posts


def test_racing_creators_of_one_object_have_one_winner(driver, project):
    store = driver.store
    container = names.container(names.MESSAGES, 'race', project)
    store.put_container(container)
    for round_ in range(5):
        wins, start = [], threading.Barrier(6)

        def contend():
            start.wait()
            wins.append(store.create(container, 'l/x/%d' % round_))

        threads = [threading.Thread(target=contend) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert wins.count(True) == 1, wins


def resend_after_lost_reply(store, monkeypatch, prefix='', limit=None):
    """python-swiftclient resending PUTs whose reply was lost: each of
    the first ``limit`` PUTs (None: all) of objects named ``prefix``...
    lands twice, the second time answered 412. Returns the (container,
    name) resent."""
    real_put, resent = store.put, []

    def put(container, name, *args, **kwargs):
        if name.startswith(prefix) and (limit is None
                                        or len(resent) < limit):
            resent.append((container, name))
            real_put(container, name, *args, **kwargs)   # reply lost
        return real_put(container, name, *args, **kwargs)

    monkeypatch.setattr(store, 'put', put)
    return resent


def rival_lands_during_the_wait(store, monkeypatch, target):
    """A rival's PUT that overlapped our first send to ``target()`` (a
    (container, name), or None before there is one) lands only while we
    wait to read back, once: its owner token replaces ours."""
    real_put, real_wait, landed = store.put, store.settle_wait, []

    def settle_wait(meanwhile=None):
        if not landed and target():
            landed.append(target())
            real_put(*target(), b'{}', headers={connection.OWNER: 'rival'})
        return real_wait(meanwhile)

    monkeypatch.setattr(store, 'settle_wait', settle_wait)
    return landed


def test_a_lost_reply_to_a_winning_put_still_wins(driver, project,
                                                  monkeypatch):
    store = driver.store
    container = names.container(names.MESSAGES, 'lost', project)
    store.put_container(container)
    resend_after_lost_reply(store, monkeypatch)
    assert store.create(container, 'l/y/1') is True
    monkeypatch.undo()
    assert store.create(container, 'l/y/1') is False


@pytest.mark.parametrize('many', [False, True])
def test_a_resent_put_that_gets_412_waits_before_its_read_back(
        driver, project, monkeypatch, many):
    # Tried: our first send lands and its reply is lost, a rival's PUT
    # overlapping it lands later, and our resend meets our own object
    # (412). Read back at once it would find our token and say we won,
    # and so would the rival after its own wait: two winners (a message
    # delivered twice, a position shared by two posts).
    store = driver.store
    container = names.container(names.MESSAGES, 'resent', project)
    store.put_container(container)
    rival_lands_during_the_wait(store, monkeypatch,
                                lambda: (container, 'p/1'))
    resend_after_lost_reply(store, monkeypatch)
    if many:
        assert store.create_many(container, [('p/1', {})]) == [False]
    else:
        assert store.create(container, 'p/1') is False
    assert store.head(container, 'p/1')[connection.OWNER.lower()] == \
        'rival'


def test_a_post_whose_resent_position_put_meets_a_rival_moves_on(
        driver, make_queue, project, monkeypatch):
    # The same at a post: its message is not filed at a position a rival
    # took; it moves to new ones, under a new id, and is stored once.
    queue = make_queue()
    post(driver, queue, project, 'warm-up')
    qs = driver.queue_state(queue, project)
    store = driver.store
    landed = rival_lands_during_the_wait(
        store, monkeypatch, lambda: resent[0] if resent else None)
    resent = resend_after_lost_reply(store, monkeypatch, 'p/', limit=1)
    [moved] = post(driver, queue, project, 'mine')
    monkeypatch.undo()
    [(_, taken)] = landed
    assert taken.startswith('p/')
    [position] = [e['name'] for e in store.listing_all(qs.c, 'p/')
                  if names.ct_params(e['content_type']).get('id') == moved]
    assert position != taken
    assert len(store.listing_all(qs.c, 'm/')) == 2
    assert bodies(listed(driver, queue, project)) == ['warm-up', 'mine']
    assert driver.message_controller.get(
        queue, moved, project=project)['body'] == 'mine'


def test_a_claim_whose_resent_lock_put_meets_a_rival_does_not_win(
        driver, make_queue, project, monkeypatch):
    # The same at a claim's lock: the message is the rival's alone.
    queue = make_queue()
    post(driver, queue, project, 'one')
    store = driver.store
    landed = rival_lands_during_the_wait(
        store, monkeypatch, lambda: resent[0] if resent else None)
    resent = resend_after_lost_reply(store, monkeypatch, 'l/', limit=1)
    _, got = claim(driver, queue, project)
    monkeypatch.undo()
    [(_, taken)] = landed
    assert taken.startswith('l/') and got == []


def test_taken_positions_are_skipped_in_order(driver, make_queue,
                                              project, clock):
    queue = make_queue()
    qs = driver.queue_state(queue, project)
    base = clock.now_ms * 1000
    # Another node holds every position this post could first pick.
    for offset in range(0, 1000, 1):
        if offset % 100 == 0:
            driver.store.put(qs.c, names.position_obj(base + offset))
    post(driver, queue, project, 'a', 'b', 'c')
    assert bodies(listed(driver, queue, project)) == ['a', 'b', 'c']
    markers = [m.position for m in listed(driver, queue,
                                                 project)]
    assert markers == sorted(markers) and min(markers) > base


def test_a_retried_post_does_not_duplicate(driver, make_queue,
                                           project):
    queue = make_queue()
    message = rules.NewMessage(id='0f0f0f0f-0000-4000-8000-000000000001',
                               ttl=60, delay=0, body='once',
                               body_json='"once"')
    messages = driver.message_controller
    messages._insert(queue, project, [message], str(CLIENT))
    messages._insert(queue, project, [message], str(CLIENT))
    assert bodies(listed(driver, queue, project)) == ['once']
    assert messages.stats(queue, project)['messages']['total'] == 1


def test_a_post_whose_resent_put_meets_its_own_unseen_write_keeps_it(
        driver, make_queue, project, monkeypatch):
    """python-swiftclient resends a PUT whose reply was lost; the resend
    gets 412 (the first one landed), and the read that tells whose object
    it is misses it (Swift's reads can lag a write). The id was made up
    by the post, so the object is its own: stored and filed, never
    dropped while its id is returned."""
    queue = make_queue()
    store = driver.store
    real_put, real_get = store.put, store.get_json

    def put(container, name, *args, **kwargs):
        if name.startswith('m/'):
            real_put(container, name, *args, **kwargs)   # reply lost
        return real_put(container, name, *args, **kwargs)

    def get_json(container, name):
        return None if name.startswith('m/') else real_get(container, name)

    monkeypatch.setattr(store, 'put', put)
    monkeypatch.setattr(store, 'get_json', get_json)
    ids = post(driver, queue, project, 'a', 'b')
    monkeypatch.undo()
    found = listed(driver, queue, project)
    assert bodies(found) == ['a', 'b']
    assert [m['id'] for m in found] == ids


def test_claimers_in_threads_never_share_a_message(driver, make_queue,
                                                   project):
    queue = make_queue()
    post(driver, queue, project, *range(20))
    got, start = [], threading.Barrier(4)

    def consume():
        start.wait()
        for _ in range(4):
            got.extend(m['id'] for m in claim(driver, queue, project,
                                              limit=3)[1])

    threads = [threading.Thread(target=consume) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == len(set(got)) == 20


def taking_a_position_first(driver, monkeypatch, times):
    """On each of its first ``times`` attempts, a post finds the second
    position it picked taken by another node (after its listing)."""
    real, picked = posts.first_free, []

    def racing(qs, now):
        base = real(qs, now)
        if len(picked) < times:
            driver.store.put(qs.c, names.position_obj(base + 1))
        picked.append(base)
        return base

    monkeypatch.setattr(posts, 'first_free', racing)
    return picked


def test_a_post_that_loses_a_position_moves_under_new_ids(
        driver, make_queue, project, monkeypatch):
    """The post wrote its messages under the positions it first picked
    (while they settled). Moved to new positions, it gives them new ids
    rather than write an object twice (a read can return the older
    version of an object Swift replaced), and deletes the first ones
    before it takes the new positions: each message returned is read by
    id at the position it is listed at, in posting order, every `m/` PUT
    was If-None-Match, and nothing of the first attempt is left."""
    queue = make_queue()
    qs = driver.queue_state(queue, project)
    post(driver, queue, project, 'warm-up')
    picked = taking_a_position_first(driver, monkeypatch, times=1)
    store, real_put, written = driver.store, driver.store.put, []

    def put(container, name, *args, **kwargs):
        if name.startswith('m/'):
            written.append((name[2:], kwargs.get('exclusive', False)))
        return real_put(container, name, *args, **kwargs)

    monkeypatch.setattr(store, 'put', put)
    ids = post(driver, queue, project, 'a', 'b', 'c')
    monkeypatch.undo()
    assert len(picked) == 2 and picked[1] > picked[0] + 1
    assert [ours for _, ours in written] == [True] * 6
    first, then = ({mid for mid, _ in written[:3]},
                   {mid for mid, _ in written[3:]})
    assert then == set(ids) and not first & then, written
    listing = listed(driver, queue, project)
    assert bodies(listing) == ['warm-up', 'a', 'b', 'c']
    assert [m['id'] for m in listing][1:] == ids
    assert [m.position for m in listing][1:] == [picked[1] + n
                                                 for n in range(3)]
    messages = driver.message_controller
    assert [messages.get(queue, mid, project=project).position
            for mid in ids] == [picked[1] + n for n in range(3)]
    assert len(driver.store.listing_all(qs.c, 'm/')) == 1 + 3
    # The warm-up's, the other node's and this post's.
    assert len(driver.store.listing_all(qs.c, 'p/')) == 1 + 1 + 3
    assert messages.stats(queue, project)['messages']['total'] == 4


def test_a_post_that_fails_while_writing_its_messages_deletes_them(
        driver, make_queue, project, monkeypatch):
    """One `m/` PUT fails in the settle wait: the post fails, and the
    messages it wrote are deleted (their positions are drafts for gc)."""
    queue = make_queue()
    qs = driver.queue_state(queue, project)
    post(driver, queue, project, 'warm-up')
    store, real_put, seen = driver.store, driver.store.put, []

    def put(container, name, *args, **kwargs):
        if name.startswith('m/'):
            seen.append(name)
            if len(seen) == 2:
                raise errors.BackendUnavailable(backend='Swift',
                                                reason='test')
        return real_put(container, name, *args, **kwargs)

    monkeypatch.setattr(store, 'put', put)
    with pytest.raises(errors.BackendUnavailable):
        post(driver, queue, project, 'a', 'b', 'c')
    monkeypatch.undo()
    assert len(seen) >= 2
    assert len(driver.store.listing_all(qs.c, 'm/')) == 1
    assert bodies(listed(driver, queue, project)) == ['warm-up']


def test_a_post_that_finds_no_free_positions_leaves_no_message(
        driver, make_queue, project, monkeypatch):
    """Every attempt loses a position: the post fails, and deletes the
    messages it wrote meanwhile (with no position left, gc would never
    find them as drafts)."""
    queue = make_queue()
    qs = driver.queue_state(queue, project)
    post(driver, queue, project, 'warm-up')
    taking_a_position_first(driver, monkeypatch,
                            times=posts.POSITION_ATTEMPTS)
    with pytest.raises(errors.BackendUnavailable):
        post(driver, queue, project, 'a', 'b')
    monkeypatch.undo()
    assert len(driver.store.listing_all(qs.c, 'm/')) == 1
    assert bodies(listed(driver, queue, project)) == ['warm-up']
