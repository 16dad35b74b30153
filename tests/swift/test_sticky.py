"""Swift: sticky groups cost a claim nothing for groups pinned to other
clients, and idle clients' groups are freed in bounded batches (requests
and objects counted on the real test Swift, never timed).

The sweep tests shrink the batch (``pins.SWEEP_BATCH``, 100 shipped) to
SMALL_BATCH, as tests/mongodb/test_sticky.py does: the batching is the
same code at any size, and every pinned group costs the test real claims
on Swift (250 groups took 2-2.5 minutes per test on a loaded machine).
"""

from tests.contract.helpers import claim, post, stats
from zaqar_delay import sticky
from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import pins

STICKY_S = 60
STICKY = {'_message_group_key': 'g', '_message_group_sticky': STICKY_S}
OTHER, MINE = 'other-client', 'my-client'
PINNED_TO_OTHER = 30
SMALL_BATCH = 10


def objects(driver, qs, prefix):
    return [e['name'] for e in driver.store.listing_all(qs.c, prefix)]


def pin_groups(driver, queue, project, client, count):
    """``count`` one-message groups pinned to ``client``, their heads
    given back (released) so that they wait under its ``A/`` prefix."""
    for start in range(0, count, 100):
        post(driver, queue, project, *[
            {'g': 'g%04d' % n} for n in range(start, min(start + 100,
                                                         count))])
    claims = []
    with sticky.acting_as(client):
        while True:
            claim_id, got = claim(driver, queue, project, limit=20)
            if not got:
                break
            claims.append(claim_id)
    for claim_id in claims:
        driver.claim_controller.delete(queue, claim_id, project=project)
    qs = driver.queue_state(queue, project)
    ck = names.client_key(client)
    assert len(objects(driver, qs, names.pinned_prefix(ck))) == count
    assert len(objects(driver, qs, 'P/')) == count
    return qs


class Listings:
    """The prefix of every listing (and the number of requests) a call
    makes."""

    def __init__(self, driver, monkeypatch):
        self.calls = []
        original = driver.store.call

        def call(method, *args, **kwargs):
            self.calls.append((method, kwargs.get('prefix')))
            return original(method, *args, **kwargs)

        monkeypatch.setattr(driver.store, 'call', call)

    def during(self, fn):
        self.calls.clear()
        fn()
        return list(self.calls)


def my_claim(driver, queue, project):
    with sticky.acting_as(MINE):
        return claim(driver, queue, project)[1]


def test_groups_pinned_to_others_cost_a_claim_nothing(
        driver, make_queue, project, monkeypatch, clock):
    crowded, empty = make_queue(STICKY), make_queue(STICKY)
    pin_groups(driver, crowded, project, OTHER, PINNED_TO_OTHER)
    for queue in (crowded, empty):
        post(driver, queue, project, {'g': 'mine'})
    listings = Listings(driver, monkeypatch)
    got = []
    crowded_calls = listings.during(
        lambda: got.extend(my_claim(driver, crowded, project)))
    assert [m['body'] for m in got] == [{'g': 'mine'}]
    listed = {prefix for method, prefix in crowded_calls
              if method == 'get_container'}
    mine = names.pinned_prefix(names.client_key(MINE))
    assert {p for p in listed if p.startswith('A/')} == {mine}, listed
    assert 'a/' in listed and 'Q/' not in listed and 'P/' not in listed
    # Request for request what the same claim costs with nothing pinned.
    empty_calls = listings.during(lambda: my_claim(driver, empty, project))
    assert len(crowded_calls) == len(empty_calls), (crowded_calls,
                                                    empty_calls)


def test_the_idle_sweep_frees_one_batch_of_groups_per_call(
        driver, make_queue, project, monkeypatch, clock):
    monkeypatch.setattr(pins, 'SWEEP_BATCH', SMALL_BATCH)
    queue = make_queue(STICKY)
    count = 2 * SMALL_BATCH + SMALL_BATCH // 2
    qs = pin_groups(driver, queue, project, OTHER, count)
    ck = names.client_key(OTHER)
    clock.advance(STICKY_S)
    left = []
    for _ in range(3):
        sweeper = driver.queue_state(queue, project)
        pins.sweep(sweeper, clock.now_ms)
        left.append((len(objects(driver, qs, 'P/')),
                     len(objects(driver, qs, names.held_prefix(ck))),
                     len(objects(driver, qs, names.pinned_prefix(ck)))))
    one, two = count - SMALL_BATCH, count - 2 * SMALL_BATCH
    assert left == [(one, one, one), (two, two, two), (0, 0, 0)]
    # Every freed head is claimable by anyone, once.
    assert len(objects(driver, qs, 'a/')) == count
    assert objects(driver, qs, names.activity_obj(ck)) != []
    pins.sweep(driver.queue_state(queue, project), clock.now_ms)
    # A client left with nothing pinned is forgotten.
    assert objects(driver, qs, 'C/') == objects(driver, qs, 'K/') == []
    with sticky.acting_as(MINE):
        assert len(claim(driver, queue, project, limit=20)[1]) == 20


def test_an_idle_sweep_stays_bounded(driver, make_queue, project,
                                     monkeypatch, clock):
    """One sweep's requests do not grow with the idle client's groups
    beyond its batch: one and a half batches pinned cost what one does."""
    monkeypatch.setattr(pins, 'SWEEP_BATCH', SMALL_BATCH)
    costs = []
    listings = Listings(driver, monkeypatch)
    for count in (SMALL_BATCH, SMALL_BATCH + SMALL_BATCH // 2):
        queue = make_queue(STICKY)
        pin_groups(driver, queue, project, OTHER, count)
        clock.advance(STICKY_S)
        costs.append(len(listings.during(lambda: pins.sweep(
            driver.queue_state(queue, project), clock.now_ms))))
    assert costs[0] == costs[1], costs


def test_a_claim_takes_its_pinned_and_free_heads_in_position_order(
        driver, make_queue, project, clock):
    """a/ and A/<ck>/ are two listings; one claim at a time (limit 1, so
    pages of two entries) still gets their heads in posting order."""
    queue = make_queue(STICKY)
    post(driver, queue, project, *[{'g': 'p%d' % n} for n in range(3)])
    with sticky.acting_as(MINE):
        claim_id, got = claim(driver, queue, project)
    post(driver, queue, project, *[{'g': g + str(n), 'n': 2}
                                   for n in range(3) for g in 'pf'])
    with sticky.acting_as(MINE):
        for message in got:
            driver.message_controller.delete(queue, message['id'],
                                             project=project,
                                             claim=claim_id)
        qs = driver.queue_state(queue, project)
        mine = names.pinned_prefix(names.client_key(MINE))
        assert len(objects(driver, qs, mine)) == 3
        assert len(objects(driver, qs, 'a/')) == 3
        taken = [claim(driver, queue, project, limit=1)[1]
                 for _ in range(7)]
    assert [m[0]['body']['g'] for m in taken if m] == [
        'p0', 'f0', 'p1', 'f1', 'p2', 'f2']
    assert not taken[-1]


def test_gc_files_the_heads_of_a_forgotten_client_for_anyone(
        driver, make_queue, project, clock):
    """A filing that raced the sweep forgetting its client leaves a head
    under A/ of a client nobody lists: gc's deep pass files it free."""
    queue = make_queue(STICKY)
    qs = pin_groups(driver, queue, project, OTHER, 2)
    ck = names.client_key(OTHER)
    driver.store.delete_many(qs.c, objects(driver, qs, 'C/')
                             + objects(driver, qs, 'K/'))
    with sticky.acting_as(MINE):
        assert claim(driver, queue, project) == (None, [])
    driver._gc_queue(qs.c)
    assert objects(driver, qs, names.pinned_prefix(ck)) == []
    with sticky.acting_as(MINE):
        assert len(claim(driver, queue, project)[1]) == 2


def test_a_head_filed_for_its_expiry_keeps_its_mark_when_its_pin_goes(
        driver, make_queue, project):
    """Freeing a pinned head moves its ``A/`` filing to ``a/``; one filed
    for its expiry (``x``: never handed out, state.QueueState.
    make_available) must stay so, or a node whose clock runs behind
    would hand it out before it is due."""
    queue = make_queue(STICKY)
    qs = driver.queue_state(queue, project)
    driver.store.put_container(qs.c, qs.meta)
    pinned = names.pinned_obj('client-key', 7, 'an-id', 1)
    for x, name in ((1, pinned), (None, names.pinned_obj('k', 8, 'b', 1))):
        driver.store.put(qs.c, name, content_type=names.content_type(
            g='gk', u='poster', x=x))
    pins.refile(qs, driver.store.listing_all(qs.c, 'A/'))
    filed = {e['name']: names.ct_params(e['content_type'])
             for e in driver.store.listing_all(qs.c, 'a/')}
    assert filed == {names.avail_obj(7, 'an-id', 1): {
                         'g': 'gk', 'u': 'poster', 'x': '1'},
                     names.avail_obj(8, 'b', 1): {'g': 'gk', 'u': 'poster'}}
    assert driver.store.listing_all(qs.c, 'A/') == []


def test_a_pinned_filing_for_an_expiry_whose_pin_went_is_dropped(
        driver, make_queue, project):
    """A head filed for its expiry under a client whose pin is gone (its
    message went, and the pin with it, before the filing did): the claim
    that meets it removes what is left, which the removal does not name
    (no pin names the client), so the filing goes in the claim's own
    bulk delete."""
    queue = make_queue(STICKY)
    qs = driver.queue_state(queue, project)
    filing = names.pinned_obj(names.client_key(MINE), 7, 'gone-id', 1)
    driver.store.put(qs.c, filing, content_type=names.content_type(
        g='gk', u='poster', x=1))
    with sticky.acting_as(MINE):
        assert claim(driver, queue, project) == (None, [])
    assert objects(driver, qs, 'A/') == []


def test_stats_free_an_idle_clients_groups_one_batch_per_call(
        driver, make_queue, project, monkeypatch, clock):
    """Stats run the idle sweep too (pins.sweep), a batch per call: once
    the other client is idle, each stats call frees SMALL_BATCH of its
    groups (pins, Q/ entries, heads refiled from A/<ck>/ to a/), with no
    claim or gc in between; a third, finding none left, forgets it.
    groups_pinned counts the P/ pins the sweep left, idle or not."""
    monkeypatch.setattr(pins, 'SWEEP_BATCH', SMALL_BATCH)
    queue = make_queue(STICKY)
    count = SMALL_BATCH + SMALL_BATCH // 2
    qs = pin_groups(driver, queue, project, OTHER, count)
    ck = names.client_key(OTHER)
    assert stats(driver, queue, project)['groups_pinned'] == count
    clock.advance(STICKY_S)
    left = []
    for _ in range(2):
        counts = stats(driver, queue, project)
        left.append((counts.get('groups_pinned'),
                     len(objects(driver, qs, 'P/')),
                     len(objects(driver, qs, names.held_prefix(ck))),
                     len(objects(driver, qs, names.pinned_prefix(ck))),
                     len(objects(driver, qs, 'a/'))))
    rest = count - SMALL_BATCH
    assert left == [(rest, rest, rest, rest, SMALL_BATCH),
                    (None, 0, 0, 0, count)]
    assert objects(driver, qs, names.activity_obj(ck)) != []
    stats(driver, queue, project)
    assert objects(driver, qs, 'C/') == objects(driver, qs, 'K/') == []


def test_heads_pinned_when_grouping_and_stickiness_both_went_wait_for_gc(
        driver, make_queue, project, clock):
    """docs/swift.md, *Sticky groups*: with ``_message_group_key`` and
    ``_message_group_sticky`` removed in one change, claims list ``a/``
    only (the queue groups nothing), so a head filed for a client stays
    there until the client is idle and gc's deep pass files it for anyone;
    removing the stickiness first frees it at the next claim."""
    queue = make_queue(STICKY)
    post(driver, queue, project, {'g': 'a', 'n': 1}, {'g': 'a', 'n': 2})
    with sticky.acting_as(OTHER):
        claim_id, got = claim(driver, queue, project, limit=1)
        driver.message_controller.delete(queue, got[0]['id'],
                                         project=project, claim=claim_id)
    driver.queue_controller.set_metadata(queue, {}, project=project)
    assert claim(driver, queue, project)[1] == []
    assert stats(driver, queue, project)['total'] == 1
    clock.advance(STICKY_S + 1)
    driver.gc()
    assert [m['body'] for m in claim(driver, queue, project)[1]] == [
        {'g': 'a', 'n': 2}]


def test_a_queue_first_written_by_a_sticky_claim_is_known_to_gc(
        driver, make_queue, project):
    """The first write to a sticky queue is often a client's claim polling
    it while empty (its activity, C/ and K/); the container it created had
    no queue names, which gc and driver.queues() go by, and a post found
    the container there: gc never settled the queue (no abandoned
    dead-letter move finished, no retention cleanup)."""
    queue = make_queue(STICKY)
    with sticky.acting_as(MINE):
        assert claim(driver, queue, project) == (None, [])
    post(driver, queue, project, {'g': 'a'})
    assert (project, queue) in set(driver.queues())
