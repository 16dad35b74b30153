"""Swift: a persistent consumer's page and a post in flight below it.

A post takes its positions from the clock and the last one listed, then
PUTs them; a later post can file its messages first, above them. A
consumer page read meanwhile hands out the later post's messages: unless
the slow post's positions land where that page looks for drafts before
it looks, or the slow post sees that a page passed them and moves, the
consumer's cursor passes messages it never got (seen as
``test_read_by_all_with_producers_and_cleaners[swift-index]`` failing
under load: one consumer missed 4 of 24).
"""

import pytest

from tests.contract.helpers import bodies, listed, post
from tests.contract.test_consumers import Reader
from tests.swift.test_strays import deep_pass
from zaqar_delay import errors
from zaqar_delay.drivers.swift import fences as fences_module
from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import posts


@pytest.fixture
def overtaken(monkeypatch, driver, clock):
    """``overtaken(meanwhile)``: the next post takes its positions, then
    ``meanwhile()`` runs (a later post, a consumer page) before it PUTs
    them."""
    real = posts.first_free

    def arm(meanwhile):
        pending = [meanwhile]

        def first_free(qs, now):
            base = real(qs, now)
            if pending:
                clock.advance(0.005)
                pending.pop()()
            return base
        monkeypatch.setattr(posts, 'first_free', first_free)
    return arm


def fences(driver, queue, project):
    qs = driver.queue_state(queue, project)
    return [e['name'] for e in driver.store.listing_all(qs.c, 'h/')]


def test_a_post_a_consumer_page_passed_moves_after_it(
        driver, make_queue, project, overtaken):
    queue = make_queue()
    reader = Reader(driver, queue, project)
    handed = {}

    def later_post_and_page():
        post(driver, queue, project, 'later', ttl=3600)
        handed['page'] = reader.page()

    overtaken(later_post_and_page)
    post(driver, queue, project, 'slow', ttl=3600)
    got, marker = handed['page']
    assert got == ['later']
    # The slow post's message was not lost behind the cursor: it moved
    # after the page, so the consumer's next page has it.
    assert reader.page(marker)[0] == ['slow']
    assert bodies(listed(driver, queue, project)) == ['later', 'slow']
    assert reader.state().lost == 0


def test_a_page_leaves_one_fence_at_its_end(driver, make_queue, project):
    queue = make_queue()
    reader = Reader(driver, queue, project)
    post(driver, queue, project, 'a', 'b', ttl=3600)
    got, marker = reader.page(limit=1)
    assert got == ['a']
    assert fences(driver, queue, project) == ['h/' + names.pos(
        int(marker))]
    got, marker = reader.page(marker, limit=1)
    assert got == ['b']
    # The page's fence replaces the one it started from.
    assert fences(driver, queue, project) == ['h/' + names.pos(
        int(marker))]


def test_a_listing_without_a_consumer_writes_no_fence(
        driver, make_queue, project):
    queue = make_queue()
    post(driver, queue, project, 'a', ttl=3600)
    assert bodies(listed(driver, queue, project)) == ['a']
    assert fences(driver, queue, project) == []


def test_gc_keeps_only_the_highest_fence_a_batch_at_a_time(
        driver, make_queue, project, monkeypatch):
    # Three consumers reading pages of 1, 2 and 3 leave a fence each:
    # none started from another's, so no page deleted one.
    queue = make_queue()
    post(driver, queue, project, 'a', 'b', 'c', ttl=3600)
    ends = [int(Reader(driver, queue, project).page(limit=limit)[1])
            for limit in (1, 2, 3)]
    assert fences(driver, queue, project) == [
        'h/' + names.pos(end) for end in ends]
    monkeypatch.setattr(fences_module, 'PRUNE_BATCH', 1)
    qs = driver.queue_state(queue, project)
    deep_pass(driver, qs)
    assert fences(driver, queue, project) == [
        'h/' + names.pos(end) for end in ends[1:]]
    deep_pass(driver, qs)
    assert fences(driver, queue, project) == ['h/' + names.pos(ends[-1])]


def test_a_post_at_the_fences_own_position_moves_after_it(
        driver, make_queue, project, monkeypatch):
    # The page handed out the message at the fence's position, which was
    # deleted since; a post whose first free position is that one (a
    # node whose clock lags, the last position gone) would sit under the
    # cursor, not after it.
    queue = make_queue()
    reader = Reader(driver, queue, project)
    [handed_id] = post(driver, queue, project, 'handed', ttl=3600)
    got, marker = reader.page()
    assert got == ['handed']
    driver.message_controller.delete(queue, handed_id, project=project)
    monkeypatch.setattr(posts, 'first_free', lambda qs, now: int(marker))
    post(driver, queue, project, 'at the fence', ttl=3600)
    assert reader.page(marker)[0] == ['at the fence']


def test_a_page_whose_old_fence_cannot_go_is_still_served(
        driver, make_queue, project, monkeypatch):
    # Tried: the DELETE of the fence a page started from fails (Swift
    # unavailable for it). The page is right without it; gc's sweep
    # deletes that fence later.
    queue = make_queue()
    reader = Reader(driver, queue, project)
    post(driver, queue, project, 'a', 'b', ttl=3600)
    got, first_end = reader.page(limit=1)
    real_delete = driver.store.delete

    def failing(container, name):
        if name.startswith(fences_module.PREFIX):
            raise errors.BackendUnavailable(backend='Swift',
                                            reason='cut: delete ' + name)
        return real_delete(container, name)

    monkeypatch.setattr(driver.store, 'delete', failing)
    got, second_end = reader.page(first_end, limit=1)
    assert got == ['b']
    assert fences(driver, queue, project) == [
        'h/' + names.pos(int(end)) for end in (first_end, second_end)]
