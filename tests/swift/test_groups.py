"""Message groups on Swift: layout, the head rule, and crash recovery.

The contract suite (tests/contract/test_groups.py) covers the behaviour;
these tests look at the objects, and at what a node dying between two
requests leaves behind.
"""

import json

import pytest

from tests.contract.helpers import bodies, claim, listed, post, stats
from zaqar_delay import retention
from zaqar_delay import rules
from zaqar_delay.drivers.swift import groups
from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import posts

GROUPED = {'_message_group_key': 'g'}
ODD_IDS = ['$where', 'a/b', '../x', 'zd:m:p:q', ':', '%2F', '\u2603',
           '\U0001F600' * 3, '', 'x' * 250, '\u2603' * 250, -7, 2 ** 62,
           'a\nb', ' ']


def objects(driver, qs, prefix=''):
    return [e['name'] for e in driver.store.listing_all(qs.c, prefix)]


def test_group_keys_keep_order_and_stay_small():
    encoded = sorted(rules.encode_group_id(g) for g in ODD_IDS)
    keys = [names.group_key(e) for e in encoded]
    assert keys == sorted(keys), 'listing order must be group-id order'
    assert len(set(keys)) == len(keys)
    for key in keys:
        assert set(key) <= set('0123456789abcdef.') and len(key) <= 533
    # Ids that share their first 256 bytes still get distinct keys.
    long_a, long_b = ('"' + 'y' * 254 + 'a"'), ('"' + 'y' * 254 + 'b"')
    assert names.group_key(long_a) != names.group_key(long_b)


def test_odd_group_ids_never_bend_object_names(driver, make_queue,
                                               project):
    queue = make_queue(GROUPED)
    for n in (1, 2):
        post(driver, queue, project,
             *[{'g': g, 'n': n} for g in ODD_IDS])
    qs = driver.queue_state(queue, project)
    every = objects(driver, qs)
    assert all(len(name.encode()) <= 1024 for name in every)
    entries = objects(driver, qs, 'g/')
    assert len(entries) == 2 * len(ODD_IDS)
    for name in entries:
        gk, _, _ = names.parse_group_entry(name)   # exactly 4 parts
        assert set(gk) <= set('0123456789abcdef.')
    # Only heads are ready: one a/ entry per group, each naming its group.
    ready = driver.store.listing_all(qs.c, 'a/')
    assert len(ready) == len(ODD_IDS)
    assert len({names.ct_params(e['content_type'])['g']
                for e in ready}) == len(ODD_IDS)
    listed_groups = list(next(driver.message_controller.list_groups(
        queue, project=project, limit=100)))
    assert [g['id'] for g in listed_groups] == sorted(
        ODD_IDS, key=rules.encode_group_id)
    assert {g['depth'] for g in listed_groups} == {2}
    _, got = claim(driver, queue, project, limit=100)
    assert sorted(m['body']['n'] for m in got) == [1] * len(ODD_IDS)


def test_a_claim_reads_heads_only(driver, make_queue, project,
                                  monkeypatch):
    queue = make_queue(GROUPED)
    post(driver, queue, project, *[{'g': 'a', 'n': n}
                                         for n in range(30)])
    post(driver, queue, project, {'g': 'b', 'n': 0})
    qs = driver.queue_state(queue, project)
    assert len(objects(driver, qs, 'a/')) == 2
    read = []
    real = driver.store.get_json
    monkeypatch.setattr(driver.store, 'get_json',
                        lambda c, name: read.append(name) or real(c, name))
    _, got = claim(driver, queue, project, limit=10)
    assert [m['body'] for m in got] == [{'g': 'a', 'n': 0},
                                        {'g': 'b', 'n': 0}]
    assert len([n for n in read if n.startswith('m/')]) == 2


def test_a_member_filed_out_of_turn_is_not_handed_out(
        driver, make_queue, project, clock):
    """Two posts crossed and both members got filed: the claim check
    still hands out the first member only, one at a time."""
    queue = make_queue(GROUPED)
    ids = post(driver, queue, project, {'g': 'a', 'n': 1},
               {'g': 'a', 'n': 2})
    qs = driver.queue_state(queue, project)
    second = driver.message_controller._get_many(queue, project,
                                                       [ids[1]],
                                                       retention.NONE)[0]
    qs.make_available(second.position, ids[1], 1,
                      clock.now_ms, clock.now_ms,
                      names.group_key(rules.encode_group_id('a')))
    claim_id, got = claim(driver, queue, project)
    assert [m['id'] for m in got] == [ids[0]]
    assert claim(driver, queue, project) == (None, [])
    driver.message_controller.delete(queue, ids[0], project=project,
                                           claim=claim_id)
    assert [m['id'] for m in claim(driver, queue, project)[1]] == [
        ids[1]]


def test_a_late_member_waits_for_the_one_in_flight(
        driver, make_queue, project, monkeypatch):
    """A post that lands with a position below a member already claimed
    (clocks, slow request) is not filed until that member leaves."""
    queue = make_queue(GROUPED)
    messages = driver.message_controller
    first = post(driver, queue, project, {'g': 'a', 'n': 'early'})[0]
    claim_id, _ = claim(driver, queue, project)
    early_pos = messages.get(queue, first, project=project).position
    monkeypatch.setattr(posts, 'first_free',
                        lambda qs, now: early_pos - 1)
    late = post(driver, queue, project, {'g': 'a', 'n': 'late'})[0]
    monkeypatch.undo()
    assert claim(driver, queue, project) == (None, [])
    messages.delete(queue, first, project=project, claim=claim_id)
    assert [m['id'] for m in claim(driver, queue, project)[1]] == [
        late]


def test_crash_between_removing_a_head_and_filing_the_next(
        driver, make_queue, project, monkeypatch):
    queue = make_queue(GROUPED)
    ids = post(driver, queue, project,
               *[{'g': 'a', 'n': n} for n in range(3)], {'g': 'b', 'n': 0})
    claim_id, got = claim(driver, queue, project, limit=1)
    assert [m['id'] for m in got] == [ids[0]]
    # The node dies right after its bulk delete of the head.
    monkeypatch.setattr(groups, 'advance', lambda *args, **kw: None)
    driver.message_controller.delete(queue, ids[0], project=project,
                                           claim=claim_id)
    monkeypatch.undo()
    # Nothing lost or reordered, but group a is stuck...
    assert [m['body'] for m in claim(driver, queue, project)[1]] == [
        {'g': 'b', 'n': 0}]
    assert claim(driver, queue, project) == (None, [])
    assert bodies(listed(driver, queue, project)) == [
        {'g': 'a', 'n': 1}, {'g': 'a', 'n': 2}]
    # ...until gc re-derives its head from the member listing.
    driver.gc()
    for n in (1, 2):
        claim_id, got = claim(driver, queue, project)
        assert [m['id'] for m in got] == [ids[n]]
        driver.message_controller.delete(queue, ids[n],
                                               project=project,
                                               claim=claim_id)
    assert stats(driver, queue, project)['total'] == 1


def test_a_half_removed_head_is_finished_by_the_next_claim(
        driver, make_queue, project):
    """A bulk delete that removed the message but not its index entries
    (a/ and g/): the claim that meets it finishes the removal."""
    queue = make_queue(GROUPED)
    ids = post(driver, queue, project, {'g': 'a', 'n': 1},
               {'g': 'a', 'n': 2})
    qs = driver.queue_state(queue, project)
    driver.store.delete_many(qs.c, [names.message_obj(ids[0])] + [
        n for n in objects(driver, qs, 'p/')][:1])
    assert [m['id'] for m in claim(driver, queue, project)[1]] == [
        ids[1]]
    assert len(objects(driver, qs, 'g/')) == 1


def test_crash_between_storing_a_message_and_its_group_entry(
        driver, make_queue, project, clock, monkeypatch):
    """The node dies before the group entry, so before it answers: the
    message is a draft (drafts.py), never handed out, removed by gc."""
    queue = make_queue(GROUPED)

    def node_dies(*args):
        raise SystemExit('node died before the group entry')

    monkeypatch.setattr(groups, "join", node_dies)
    with pytest.raises(SystemExit):
        post(driver, queue, project, {'g': 'a', 'n': 1})
    monkeypatch.undo()
    assert claim(driver, queue, project) == (None, [])
    assert stats(driver, queue, project)['total'] == 0
    clock.advance(61)
    driver.gc()
    # Nothing but gc's own summary of the queue (summary.py) is left.
    assert objects(driver, driver.queue_state(queue, project)) == [
        names.GC_SUMMARY]
    later = post(driver, queue, project, {'g': 'a', 'n': 2})[0]
    assert [m['id'] for m in claim(driver, queue, project)[1]] == [later]


def test_gc_finishes_a_move_whose_node_died(driver, make_queue,
                                            project, clock,
                                            monkeypatch):
    target = make_queue(GROUPED, name='target')
    queue = make_queue(GROUPED)
    ids = post(driver, queue, project,
               *[{'g': 'a', 'n': n} for n in range(3)])
    qs = driver.queue_state(queue, project)

    def die(*args, **kwargs):
        raise SystemExit('node died')

    # The node locks the head, copies the group, and dies before deleting.
    monkeypatch.setattr(qs, 'remove', die)
    monkeypatch.setattr(driver, 'queue_state', lambda q, p: qs)
    with pytest.raises(SystemExit):
        driver.message_controller.move_group(queue, 'a', target,
                                                   project=project)
    monkeypatch.undo()
    assert claim(driver, queue, project) == (None, [])
    clock.advance(120)
    driver.gc()
    assert [m['id'] for m in listed(driver, target, project)] == ids
    assert stats(driver, queue, project)['total'] == 0
    assert [m['id'] for m in claim(driver, target, project)[1]] == [
        ids[0]]


def test_purge_and_move_clean_every_object(driver, make_queue,
                                           project):
    target = make_queue(GROUPED, name='target')
    queue = make_queue(dict(GROUPED, _default_message_delay=30))
    post(driver, queue, project, {'g': 'a', 'n': 1},
         {'g': 'b', 'n': 1}, {'g': 'a', 'n': 2}, {'g': 'b', 'n': 2})
    messages = driver.message_controller
    assert messages.purge_group(queue, 'a', project=project) == 2
    assert messages.move_group(queue, 'b', target, project=project) == 2
    qs = driver.queue_state(queue, project)
    # Delayed heads leave their d/ entry (its name holds the due time); it
    # points at nothing and is dropped when it comes due, as for any
    # deleted delayed message.
    assert [n for n in objects(driver, qs) if n[:2] != 'd/'] == []
    assert len(objects(driver, qs, 'd/')) == 2
    moved = listed(driver, target, project, include_delayed=True)
    assert [m['body'] for m in moved] == [{'g': 'b', 'n': 1},
                                          {'g': 'b', 'n': 2}]
    target_qs = driver.queue_state(target, project)
    delayed = objects(driver, target_qs, 'd/')
    assert len(delayed) == 1 and moved[0]['id'] in delayed[0]
    entry = driver.store.listing(target_qs.c, 'g/')[0]
    assert json.loads(names.ct_params(entry['content_type'])['g']) == 'b'


def move_dies_after_locking_the_head(driver, monkeypatch, project, queue,
                                     target):
    """A move of group 'a' whose node dies once it locked the head."""
    from zaqar_delay.drivers.swift import group_admin

    def node_dies(*args, **kwargs):
        raise SystemExit('node died after locking the head')

    monkeypatch.setattr(group_admin, 'transfer', node_dies)
    with pytest.raises(SystemExit):
        driver.message_controller.move_group(queue, 'a', target,
                                             project=project)
    monkeypatch.undo()


def test_an_interrupted_move_lands_though_its_target_metadata_went_bad(
        driver, make_queue, project, clock, monkeypatch):
    queue, target = make_queue(GROUPED), make_queue()
    post(driver, queue, project, {'g': 'a', 'n': 1}, {'g': 'a', 'n': 2},
         ttl=3600)

    move_dies_after_locking_the_head(driver, monkeypatch, project, queue,
                                     target)
    driver.queue_controller.set_metadata(target, {'_message_group_key': 5},
                                         project=project)
    # Well past gc's 60 s, whatever the time the steps above took.
    clock.advance(600)
    # gc of the one queue (driver.gc() walks every queue of the session).
    driver._gc_queue(names.container(names.MESSAGES, queue, project))
    assert bodies(listed(driver, target, project)) == [
        {'g': 'a', 'n': 1}, {'g': 'a', 'n': 2}]
    assert listed(driver, queue, project, include_claimed=True) == []


def test_a_move_gc_gives_back_for_want_of_a_target_keeps_its_delay(
        driver, make_queue, project, clock, monkeypatch):
    """The node moving a delayed group died after locking its head, and
    the target queue is gone when gc finishes the move: the head goes
    back to its group, claimable when it is due, not at once."""
    queue = make_queue(dict(GROUPED, _default_message_delay=900))
    target = make_queue(GROUPED)
    post(driver, queue, project, {'g': 'a', 'n': 1}, {'g': 'a', 'n': 2},
         ttl=3600)

    move_dies_after_locking_the_head(driver, monkeypatch, project, queue,
                                     target)
    driver.queue_controller.delete(target, project=project)
    clock.advance(600)
    driver._gc_queue(names.container(names.MESSAGES, queue, project))
    assert claim(driver, queue, project) == (None, [])
    clock.advance(301)
    assert bodies(claim(driver, queue, project)[1]) == [{'g': 'a', 'n': 1}]


def test_a_head_filed_for_its_expiry_is_never_handed_out(
        driver, make_queue, project, clock):
    """A head that expires before it is due is filed for its expiry,
    marked ``x``. A node whose clock runs behind the one that promoted
    it still sees it live: it must not hand it out (it is never due),
    nor the member behind it; once it expired there too, the member."""
    queue = make_queue(dict(GROUPED, _default_message_delay=120))
    post(driver, queue, project, {'g': 'a', 'n': 1}, ttl=60)
    post(driver, queue, project, {'g': 'a', 'n': 2}, ttl=600, delay=0)
    qs = driver.queue_state(queue, project)
    [filing] = objects(driver, qs, 'd/')
    assert names.ct_params(driver.store.head(qs.c, filing)[
        'content-type']).get('x') == '1'
    clock.advance(61)
    qs.settle(driver.now_ms())  # the node ahead promotes it
    assert len(objects(driver, qs, 'a/')) == 1
    clock.advance(-2)           # a node 2 s behind claims
    assert claim(driver, queue, project) == (None, [])
    assert len(objects(driver, qs, 'a/')) == 1, 'left for a later claim'
    clock.advance(2)
    assert bodies(claim(driver, queue, project)[1]) == [{'g': 'a', 'n': 2}]
    assert objects(driver, qs, 'a/') == []


def test_a_group_entry_written_without_an_expiry_is_filed_for_its_due(
        driver, make_queue, project, clock, monkeypatch):
    """Entries from before the expiry was kept in them: the head waits
    until due, as it did then, and is removed then."""
    queue = make_queue(dict(GROUPED, _default_message_delay=120))
    monkeypatch.setattr(groups, 'entry_type', lambda m: names.content_type(
        d=m.due, g=m.group))
    post(driver, queue, project, {'g': 'a', 'n': 1}, ttl=60)
    post(driver, queue, project, {'g': 'a', 'n': 2}, ttl=600, delay=0)
    monkeypatch.undo()
    qs = driver.queue_state(queue, project)
    [filing] = objects(driver, qs, 'd/')
    assert 'x' not in names.ct_params(
        driver.store.head(qs.c, filing)['content-type'])
    clock.advance(61)
    assert claim(driver, queue, project) == (None, [])
    clock.advance(60)
    assert bodies(claim(driver, queue, project)[1]) == [{'g': 'a', 'n': 2}]


def test_heads_dropped_at_their_expiry_are_deleted_once(
        driver, make_queue, project, clock, monkeypatch):
    """A claim meeting heads filed for their expiry, all expired, removes
    each with its filings and sends no second delete of any filing the
    removal deleted: a Swift DELETE of an absent object still writes a
    tombstone and a container update."""
    queue = make_queue(dict(GROUPED, _default_message_delay=120))
    post(driver, queue, project, {'g': 'a', 'n': 1}, {'g': 'b', 'n': 1},
         {'g': 'c', 'n': 1}, ttl=60)
    post(driver, queue, project, {'g': 'a', 'n': 2}, {'g': 'b', 'n': 2},
         {'g': 'c', 'n': 2}, ttl=600, delay=0)
    qs = driver.queue_state(queue, project)
    assert len(objects(driver, qs, 'd/')) == 3
    clock.advance(61)
    sent = []
    real = driver.store.delete_many

    def delete_many(container, doomed, *args, **kwargs):
        sent.extend(doomed)
        return real(container, doomed, *args, **kwargs)

    monkeypatch.setattr(driver.store, 'delete_many', delete_many)
    _, got = claim(driver, queue, project, limit=3)
    assert sorted(m['body']['g'] for m in got) == ['a', 'b', 'c']
    assert {m['body']['n'] for m in got} == {2}
    assert len([n for n in sent if n.startswith('m/')]) == 3
    twice = [name for name in set(sent) if sent.count(name) > 1]
    assert twice == []
    assert objects(driver, qs, 'd/') == objects(driver, qs, 'a/') == []


def test_a_move_holds_one_page_of_members_at_a_time(
        driver, make_queue, project, monkeypatch):
    """A move reads, copies and deletes MOVE_BATCH members at a time (3
    here), so what it holds in memory does not grow with the group; the
    target gets them all, in order, with their ids. A member posted while
    the move runs stays here as the group's new head."""
    from zaqar_delay.drivers.swift import group_admin
    monkeypatch.setattr(group_admin, 'MOVE_BATCH', 3)
    queue, target = make_queue(GROUPED), make_queue(GROUPED)
    ids = post(driver, queue, project,
               *[{'g': 'a', 'n': n} for n in range(8)], ttl=3600)
    inserted, real_insert = [], driver.message_controller._insert

    def insert(into, project_id, batch, *args, **kwargs):
        if into == target:
            inserted.append(len(batch))
        if len(inserted) == 2 and into == target:
            post(driver, queue, project, {'g': 'a', 'n': 'late'})
        return real_insert(into, project_id, batch, *args, **kwargs)

    monkeypatch.setattr(driver.message_controller, '_insert', insert)
    assert driver.message_controller.move_group(
        queue, 'a', target, project=project) == 8
    monkeypatch.undo()
    assert inserted == [3, 3, 2]
    moved = listed(driver, target, project, include_delayed=True)
    assert [m['id'] for m in moved] == ids
    assert bodies(claim(driver, queue, project)[1]) == [
        {'g': 'a', 'n': 'late'}]


def test_a_purge_holds_one_page_of_members_at_a_time(
        driver, make_queue, project, monkeypatch):
    """A purge reads and deletes MOVE_BATCH members at a time (3 here),
    from the tail, so no member is filed as a head while it runs and
    what it holds does not grow with the group."""
    from zaqar_delay.drivers.swift import group_admin
    monkeypatch.setattr(group_admin, 'MOVE_BATCH', 3)
    queue = make_queue(GROUPED)
    post(driver, queue, project, *[{'g': 'a', 'n': n} for n in range(8)],
         {'g': 'b', 'n': 0}, ttl=3600)
    pages, real_live_members = [], group_admin.live_members

    def live_members(*args, **kwargs):
        found, last = real_live_members(*args, **kwargs)
        pages.append([m.body['n'] for m in found])
        return found, last

    monkeypatch.setattr(group_admin, 'live_members', live_members)
    assert driver.message_controller.purge_group(queue, 'a',
                                                 project=project) == 8
    monkeypatch.undo()
    assert pages == [[7, 6, 5], [4, 3, 2], [1, 0]]
    qs = driver.queue_state(queue, project)
    # Group b's member, its filing and its position are all that is left.
    assert [len(objects(driver, qs, prefix))
            for prefix in ('g/', 'a/', 'p/', 'm/')] == [1, 1, 1, 1]
    assert bodies(claim(driver, queue, project)[1]) == [{'g': 'b', 'n': 0}]
