"""Swift gc: a pass over a queue with nothing due does not list the
queue (summary.py), yet still finds what falls due; locks of removed
messages are deleted; bulk deletes stay small. Work is counted (requests,
names listed), never timed."""

import pytest

from tests.contract.helpers import bodies, claim, listed, post, stats
from zaqar_delay.drivers.swift import driver as swift_driver
from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import state
from zaqar_delay.drivers.swift import summary


class Work:
    """Counts a driver's Swift requests and the names its listings
    returned, per prefix."""

    def __init__(self, driver, monkeypatch):
        self.requests, self.listed = 0, {}
        store = driver.store
        call, listing = store.call, store.listing

        def counted_call(method, *args, **kwargs):
            self.requests += 1
            return call(method, *args, **kwargs)

        def counted_listing(container, prefix, *args, **kwargs):
            found = listing(container, prefix, *args, **kwargs)
            self.listed[prefix] = self.listed.get(prefix, 0) + len(found)
            return found

        monkeypatch.setattr(store, 'call', counted_call)
        monkeypatch.setattr(store, 'listing', counted_listing)

    def during(self, fn):
        self.requests, self.listed = 0, {}
        fn()
        return self.requests, sum(self.listed.values())


def container(queue, project):
    return names.container(names.MESSAGES, queue, project)


def gc(driver, queue, project):
    return driver._gc_queue(container(queue, project))


def deep(work, driver, queue, project):
    """True if a gc pass of ``queue`` was deep (listed ``a/``)."""
    work.during(lambda: gc(driver, queue, project))
    return 'a/' in work.listed


def expiring_queue(driver, make_queue, project):
    """A queue of 'short' (ttl 60 s) and 'long', after a deep pass."""
    queue = make_queue()
    post(driver, queue, project, 'short', ttl=60)
    post(driver, queue, project, 'long', ttl=3600)
    gc(driver, queue, project)
    return queue


def objects(driver, queue, project, prefix):
    return [e['name'] for e in driver.store.listing_all(
        container(queue, project), prefix)]


def test_a_pass_with_nothing_due_does_not_list_the_queue(
        driver, clock, make_queue, project, monkeypatch):
    small, large = make_queue(), make_queue()
    post(driver, small, project, *range(10), ttl=3600)
    for start in range(0, 300, 100):
        post(driver, large, project, *range(start, start + 100), ttl=3600)
    work = Work(driver, monkeypatch)
    # The first pass is deep: it lists the whole queue, then writes the
    # summary.
    work.during(lambda: gc(driver, large, project))
    assert work.listed['p/'] == 300 and work.listed['a/'] == 300
    gc(driver, small, project)
    clock.advance(summary.DEEP_EVERY_S // 2)
    assert work.during(lambda: gc(driver, small, project)) == \
        work.during(lambda: gc(driver, large, project)) == (5, 0)
    assert 'a/' not in work.listed
    assert stats(driver, large, project)['total'] == 300


def test_what_falls_due_after_a_deep_pass_is_still_found(
        driver, clock, make_queue, project, monkeypatch):
    queue = expiring_queue(driver, make_queue, project)
    work = Work(driver, monkeypatch)
    assert not deep(work, driver, queue, project)
    # The summary's next instant is the earliest expiry: a deep pass.
    clock.advance(61)
    assert gc(driver, queue, project) == 1
    assert len(objects(driver, queue, project, 'p/')) == 1
    # Without anything due, the backstop: a deep pass every DEEP_EVERY_S.
    assert not deep(work, driver, queue, project)
    clock.advance(summary.DEEP_EVERY_S)
    assert deep(work, driver, queue, project)


def test_a_queue_receiving_posts_gets_a_deep_pass_a_minute_after_one(
        driver, clock, make_queue, project, monkeypatch):
    """docs/usage.md: a message posted since the last deep pass makes
    passes light until it could be a draft (drafts.DRAFT_AGE_S, 60 s),
    then the next pass is deep. Here a post and a pass every 25 s (away
    from the 60 s edge): the post at 0 makes the pass at 75 deep, the
    post at 100 (the first after it) the pass at 175."""
    queue = make_queue()
    post(driver, queue, project, 'first', ttl=3600)
    gc(driver, queue, project)
    work = Work(driver, monkeypatch)
    deep_at = []
    for second in range(0, 201, 25):
        post(driver, queue, project, second, ttl=3600)
        if deep(work, driver, queue, project):
            deep_at.append(second)
        clock.advance(25)
    assert deep_at == [75, 175]


def test_a_post_cut_short_after_a_deep_pass_is_removed_as_a_draft(
        driver, clock, make_queue, project, monkeypatch):
    queue = make_queue()
    post(driver, queue, project, 'kept')
    gc(driver, queue, project)
    with monkeypatch.context() as patch:
        # The node dies after storing the message, before filing it.
        patch.setattr(state.QueueState, 'make_available', _dies)
        with pytest.raises(SystemExit):
            post(driver, queue, project, 'draft')
    assert len(objects(driver, queue, project, 'p/')) == 2
    # Younger than DRAFT_AGE_S it may be a post still running: left.
    gc(driver, queue, project)
    assert len(objects(driver, queue, project, 'p/')) == 2
    clock.advance(61)
    gc(driver, queue, project)
    assert len(objects(driver, queue, project, 'p/')) == 1
    assert bodies(claim(driver, queue, project)[1]) == ['kept']


def _dies(*args, **kwargs):
    raise SystemExit('node died')


def test_an_abandoned_dead_letter_move_after_a_deep_pass_is_finished(
        driver, make_queue, project, clock):
    dlq = make_queue(name='dlq')
    queue = make_queue({'_max_claim_count': 1, '_dead_letter_queue': dlq})
    mid = post(driver, queue, project, 'poison')[0]
    gc(driver, queue, project)
    qs = driver.queue_state(queue, project)
    # A node won the dead-letter lock of attempt 1 and died.
    driver.store.create(qs.c, names.lock_obj(mid, 1),
                        content_type=names.content_type(c=names.DEAD))
    driver.store.delete(qs.c, names.avail_obj(
        listed(driver, queue, project)[0].position, mid, 1))
    clock.advance(2 * swift_driver.GC_ABANDONED_S)
    gc(driver, queue, project)
    assert bodies(listed(driver, dlq, project)) == ['poison']
    assert stats(driver, queue, project)['total'] == 0


def test_a_deep_pass_that_died_leaves_the_next_one_deep(
        driver, clock, make_queue, project, monkeypatch):
    queue = expiring_queue(driver, make_queue, project)
    before = driver.store.head(container(queue, project), names.GC_SUMMARY)
    clock.advance(61)
    with monkeypatch.context() as patch:
        patch.setattr(swift_driver.groups, 'repair', _dies)
        with pytest.raises(SystemExit):
            gc(driver, queue, project)
    after = driver.store.head(container(queue, project), names.GC_SUMMARY)
    assert after['content-type'] == before['content-type']
    assert deep(Work(driver, monkeypatch), driver, queue, project)
    assert bodies(claim(driver, queue, project)[1]) == ['long']


def test_an_older_summary_written_late_only_makes_passes_look_more(
        driver, clock, make_queue, project, monkeypatch):
    queue = make_queue()
    post(driver, queue, project, 'old')
    gc(driver, queue, project)
    stale = driver.store.head(container(queue, project), names.GC_SUMMARY)
    post(driver, queue, project, 'new')
    # 'new' could be a draft now: a deep pass judges it.
    clock.advance(61)
    work = Work(driver, monkeypatch)
    assert deep(work, driver, queue, project)
    assert not deep(work, driver, queue, project)
    # A slow gc host writes what it saw before 'new' was posted: the
    # next pass judges 'new' again, and the one after is light.
    driver.store.put(container(queue, project), names.GC_SUMMARY,
                     content_type=stale['content-type'])
    assert deep(work, driver, queue, project)
    assert not deep(work, driver, queue, project)


# -- locks of removed messages (l/) -------------------------------------

def test_gc_deletes_the_locks_of_removed_messages(driver, clock, make_queue,
                                                  project):
    queue = make_queue({'_retention': {'length': 1}})
    ids = post(driver, queue, project, 'a', 'b', 'c')
    assert driver.clean_queue(queue, project) == 2
    qs = driver.queue_state(queue, project)
    # A claim lock taken while a remover ran, its message gone since.
    driver.store.create(qs.c, names.lock_obj('gone', 3),
                        content_type=names.content_type(c='some-claim'))
    # A live message's lock stays whatever its age.
    claim_id, _ = claim(driver, queue, project, ttl=3600)
    leaked = [names.lock_obj(i, 1) for i in ids[:2]] + [
        names.lock_obj('gone', 3)]
    kept = [names.lock_obj(ids[2], 1)]
    assert sorted(objects(driver, queue, project, 'l/')) == sorted(
        leaked + kept)
    # Young, the ret locks are tombstones against a retried PUT.
    gc(driver, queue, project)
    assert sorted(objects(driver, queue, project, 'l/')) == sorted(
        leaked + kept)
    clock.advance(2 * swift_driver.GC_ABANDONED_S)
    gc(driver, queue, project)
    assert objects(driver, queue, project, 'l/') == kept
    assert driver.message_controller.stats(
        queue, project)['retention']['removed'] == 2


def test_leaked_locks_go_in_bounded_batches(driver, clock, make_queue,
                                           project, monkeypatch):
    queue = make_queue()
    qs = driver.queue_state(queue, project)
    driver.store.put_container(qs.c, qs.meta)
    for n in range(3):
        driver.store.create(qs.c, names.lock_obj('gone-%d' % n, 1),
                            content_type=names.content_type(c=names.POP))
    clock.advance(2 * swift_driver.GC_ABANDONED_S)
    monkeypatch.setattr(state, 'SETTLE_BATCH', 2)
    gc(driver, queue, project)
    assert len(objects(driver, queue, project, 'l/')) == 1
    # The summary calls for another deep pass at once.
    gc(driver, queue, project)
    assert objects(driver, queue, project, 'l/') == []


# -- bulk deletes -------------------------------------------------------

def test_a_cleanup_batch_is_several_small_bulk_deletes(
        driver, clock, make_queue, project, monkeypatch):
    if not driver.store._has_bulk_delete():
        pytest.fail('the test Swift must have the bulk middleware')
    queue = make_queue({'_retention': {'time': 60}})
    # Three names per message (p/, m/, a/): 330, one bulk delete of old.
    count = 110
    for start in range(0, count, 50):
        post(driver, queue, project, *range(start, min(count, start + 50)))
    clock.advance(61)
    sizes = []
    call = driver.store.call

    def recorded(method, *args, **kwargs):
        if method == 'post_account':
            sizes.append(len(kwargs['data'].splitlines()))
        return call(method, *args, **kwargs)

    monkeypatch.setattr(driver.store, 'call', recorded)
    # One batch of tuples_per_iteration messages: every one removed.
    assert driver.message_controller.clean(queue, project, count)[0] == count
    # 1,000 names in one bulk delete outlasted the timeout under load.
    assert len(sizes) >= 2 and max(sizes) <= 200
    assert objects(driver, queue, project, 'm/') == []
