"""Round trips on Swift: what one call waits for, not how long it takes
(counted and synchronized here, never timed)."""

import functools
import threading

import pytest
from zaqar.storage import errors as storage_errors

from tests.contract.helpers import claim, listed, post
from tests.swift.requests import Requests
from zaqar_delay.drivers.swift import names

# More messages than the default max_parallel_requests (8): the requests of
# one call then go out in two waves.
WIDE = 12


def count_settle_waits(driver, monkeypatch):
    waits = []
    real = driver.store.settle_wait

    def settle_wait(meanwhile=None):
        waits.append(1)
        real(meanwhile)

    monkeypatch.setattr(driver.store, 'settle_wait', settle_wait)
    return waits


def test_a_post_wider_than_the_pool_waits_to_settle_once(
        driver, make_queue, project, monkeypatch):
    queue = make_queue()
    waits = count_settle_waits(driver, monkeypatch)
    ids = post(driver, queue, project, *range(WIDE))
    assert len(ids) == WIDE
    assert len(waits) == 1


def test_a_claim_wider_than_the_pool_waits_to_settle_once(
        driver, make_queue, project, monkeypatch):
    queue = make_queue()
    post(driver, queue, project, *range(WIDE))
    waits = count_settle_waits(driver, monkeypatch)
    _, got = claim(driver, queue, project, limit=WIDE)
    assert [m['body'] for m in got] == list(range(WIDE))
    assert len(waits) == 1


def test_racing_batches_of_creates_have_one_winner_per_object(driver,
                                                              project):
    container = names.container(names.MESSAGES, 'race-many', project)
    driver.store.put_container(container)
    items = [('l/m%d/1' % n, {}) for n in range(WIDE)]
    start, results = threading.Barrier(3), []

    def contend():
        start.wait()
        results.append(driver.store.create_many(container, items))

    threads = [threading.Thread(target=contend) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for column in zip(*results):
        assert column.count(True) == 1, column


def request_kind(method, args, kwargs):
    """(method, name prefix), a lock's HEAD also naming its attempt."""
    name = (kwargs.get('prefix') if method == 'get_container' else (
        args[1] if len(args) > 1 else '')) or ''
    if method == 'head_object' and name.startswith('l/'):
        return method, 'l/' + name.rsplit('/', 1)[1]
    return method, name[:2]


def record_kinds(driver, monkeypatch):
    """The list to which the kind of each request ``driver`` sends from
    now on is appended."""
    kinds = []
    real_call = driver.store.call

    def call(method, *args, **kwargs):
        kinds.append(request_kind(method, args, kwargs))
        return real_call(method, *args, **kwargs)

    monkeypatch.setattr(driver.store, 'call', call)
    return kinds


def test_a_delete_by_its_claimer_reads_its_lock_and_consumers_at_once(
        driver, make_queue, project, monkeypatch):
    """The two reads a delete by its claimer needs are in flight
    together (its lock by name, the consumers): each waits at a barrier
    for the other, so a delete that read them one after another would
    break the barrier and fail; then comes its bulk delete, and nothing
    else: no lock listing (a HEAD costs Swift less), no HEAD of a later
    lock (none is taken while the claim lives), and neither the claim's
    record nor the message is read: the lock holds the claim's expiry
    and the message's position and group (names.py, ``l/``)."""
    queue = make_queue()
    post(driver, queue, project, 'x')
    claim_id, got = claim(driver, queue, project)
    store = driver.store
    real_call = store.call
    first_round = {('head_object', 'l/1'), ('get_container', 'v/')}
    barrier = threading.Barrier(len(first_round), timeout=10)
    met = []

    after = []

    def call(method, *args, **kwargs):
        kind = request_kind(method, args, kwargs)
        if kind in first_round:
            first_round.discard(kind)
            barrier.wait()
            met.append(kind)
        elif len(met) == 2:
            after.append(method)
        else:
            met.append(kind)
        return real_call(method, *args, **kwargs)

    monkeypatch.setattr(store, 'call', call)
    driver.message_controller.delete(queue, got[0]['id'], project=project,
                                     claim=claim_id)
    monkeypatch.undo()
    assert len(met) == 2, met
    assert after == ['post_account'], after  # the bulk delete
    assert list(driver.message_controller.bulk_get(
        queue, [got[0]['id']], project=project)) == []


def test_a_delete_by_the_claimer_of_a_later_attempt_lists_its_locks(
        driver, make_queue, project, clock, monkeypatch):
    # Its second lock exists: the locks are listed after the first round,
    # and the delete goes by the latest, the caller's.
    queue = make_queue()
    post(driver, queue, project, 'x')
    first_claim, _ = claim(driver, queue, project, ttl=60)
    clock.advance(61)
    claim_id, got = claim(driver, queue, project)
    assert claim_id != first_claim and len(got) == 1
    kinds = record_kinds(driver, monkeypatch)
    with pytest.raises(storage_errors.MessageNotClaimedBy):
        driver.message_controller.delete(queue, got[0]['id'],
                                         project=project, claim=first_claim)
    assert ('get_container', 'l/') in kinds, kinds
    driver.message_controller.delete(queue, got[0]['id'], project=project,
                                     claim=claim_id)
    monkeypatch.undo()
    assert list(driver.message_controller.bulk_get(
        queue, [got[0]['id']], project=project)) == []


def test_a_retried_delete_whose_removal_went_asks_for_each_lock_once(
        driver, make_queue, project, monkeypatch):
    # Its reply was lost: the retry finds no first lock, so asks for no
    # later one, finds no message, and answers as the delete did.
    queue = make_queue()
    post(driver, queue, project, 'x')
    claim_id, got = claim(driver, queue, project)
    delete = functools.partial(driver.message_controller.delete, queue,
                               got[0]['id'], project=project, claim=claim_id)
    delete()
    kinds = record_kinds(driver, monkeypatch)
    delete()
    assert kinds.count(('head_object', 'l/1')) == 1, kinds
    assert ('head_object', 'l/2') not in kinds, kinds
    assert ('post_account', '') not in kinds, kinds


def test_a_post_of_n_sends_two_listings_and_four_requests_per_message(
        driver, make_queue, project, monkeypatch):
    # docs/swift.md, *Swift requests per operation*, and the README's
    # "42 requests for a post of 10": per message its position (PUT, then
    # a HEAD to read it back), the message and its claimable entry; the
    # last position listed, and the highest consumer fence (fences.py).
    queue = make_queue()
    post(driver, queue, project, 'warm-up')
    requests = Requests(driver, monkeypatch)
    assert requests.during(lambda: post(driver, queue, project,
                                        *range(10))) == 2 + 4 * 10
    assert sorted(set(requests.calls)) == ['get_container', 'head_object',
                                           'put_object']
    assert requests.calls.count('get_container') == 2
    assert requests.calls.count('head_object') == 10
    assert requests.calls.count('put_object') == 3 * 10


def test_a_queues_first_post_makes_its_container_once(
        driver, make_queue, project, monkeypatch):
    # The first post's position PUTs, in parallel, all meet the missing
    # container: one container PUT serves them all (each made it before),
    # then each PUT is sent again. WIDE positions: two waves of the pool.
    queue = make_queue()
    requests = Requests(driver, monkeypatch)
    assert requests.during(lambda: post(driver, queue, project,
                                        *range(WIDE))) > 2 + 4 * WIDE
    assert requests.calls.count('put_container') == 1, requests.calls
    assert requests.calls.count('put_object') <= 4 * WIDE, requests.calls
    assert [m['body'] for m in claim(driver, queue, project,
                                     limit=WIDE)[1]] == list(range(WIDE))


def test_a_container_slow_to_make_holds_up_no_other_queue(
        driver, make_queue, project, monkeypatch):
    # Tried: one queue's first post whose container PUT hangs, and
    # meanwhile another queue's first post, which makes its own.
    slow, other = make_queue(), make_queue()
    slow_container = names.container(names.MESSAGES, slow, project)
    making, release = threading.Event(), threading.Event()
    real = driver.store.put_container

    def put_container(container, meta=None):
        if container == slow_container:
            making.set()
            release.wait(10)
        return real(container, meta)

    monkeypatch.setattr(driver.store, 'put_container', put_container)
    stuck = threading.Thread(target=post, args=(driver, slow, project, 'a'))
    stuck.start()
    try:
        assert making.wait(10)
        assert len(post(driver, other, project, 'b')) == 1
        assert stuck.is_alive(), 'the other post waited for the slow one'
    finally:
        release.set()
        stuck.join(30)
    for queue, body in ((slow, 'a'), (other, 'b')):
        assert [m['body'] for m in claim(driver, queue, project)[1]] == [
            body]


def requests_by_wait(driver, monkeypatch):
    """(method, first two characters of the object name or listing
    prefix, True if sent during a settle wait) of each request the driver
    sends."""
    store = driver.store
    real_call, real_wait = store.call, store.settle_wait
    sent, waiting = [], []

    def call(method, *args, **kwargs):
        name = (args[1] if method.endswith('_object')
                else kwargs.get('prefix') or '')
        sent.append((method, name[:2], bool(waiting)))
        return real_call(method, *args, **kwargs)

    def settle_wait(meanwhile=None):
        waiting.append(1)
        try:
            real_wait(meanwhile)
        finally:
            waiting.pop()

    monkeypatch.setattr(store, 'call', call)
    monkeypatch.setattr(store, 'settle_wait', settle_wait)
    return sent


def test_a_post_writes_its_messages_while_its_positions_settle(
        driver, make_queue, project, monkeypatch):
    """Every `m/` PUT of a post is sent during the one settle wait of its
    positions; the read-backs (HEAD `p/`) and filings (PUT `a/`) after
    it. A post that wrote its messages after the read-backs, as it did
    before, fails here. The fence listing (fences.py) follows every
    position's PUT, as the wait begins (sent from the pool as the wait
    is entered, so not counted by the wait flag)."""
    queue = make_queue()
    post(driver, queue, project, 'warm-up')
    sent = requests_by_wait(driver, monkeypatch)
    ids = post(driver, queue, project, *range(WIDE))
    monkeypatch.undo()
    kinds = [(method, prefix) for method, prefix, _ in sent]
    fence_read = kinds.index(('get_container', 'h/'))
    assert fence_read > max(n for n, kind in enumerate(kinds)
                            if kind == ('put_object', 'p/')), sent
    sent = [request for request in sent if request[1] != 'h/']
    assert sorted(set(sent)) == [('get_container', 'p/', False),
                                 ('head_object', 'p/', False),
                                 ('put_object', 'a/', False),
                                 ('put_object', 'm/', True),
                                 ('put_object', 'p/', False)], sent
    assert sent.count(('put_object', 'm/', True)) == WIDE
    assert [m['id'] for m in listed(driver, queue, project)][1:] == ids


def test_a_claim_reads_and_unfiles_its_messages_while_its_locks_settle(
        driver, make_queue, project, monkeypatch):
    """Every message read (GET `m/`) of a claim, and the bulk delete of
    the filings (`a/`) it locked, are sent during the settle wait of its
    locks; after the wait come the read-backs (HEAD `l/`) and nothing
    else. A claim that read its messages with the read-backs, or deleted
    the filings after them, as it did before, fails here."""
    queue = make_queue()
    # Outliving the claim: no message's expiry to extend after it.
    post(driver, queue, project, *range(WIDE), ttl=3600)
    sent = requests_by_wait(driver, monkeypatch)
    _, got = claim(driver, queue, project, limit=WIDE)
    monkeypatch.undo()
    assert [m['body'] for m in got] == list(range(WIDE))
    during = [(method, prefix) for method, prefix, wait in sent if wait]
    assert sorted(set(during)) == [('get_object', 'm/'),
                                   ('post_account', '')], sent
    assert during.count(('get_object', 'm/')) == WIDE
    last_put = max(n for n, (method, _, _) in enumerate(sent)
                   if method == 'put_object')
    assert [(method, prefix) for method, prefix, wait
            in sent[last_put + 1:] if not wait] == [
        ('head_object', 'l/')] * WIDE, sent
    qs = driver.queue_state(queue, project)
    assert driver.store.listing_all(qs.c, 'a/') == []


def test_a_claim_lists_its_first_page_while_it_settles(
        driver, clock, make_queue, project, monkeypatch):
    """On a queue whose retention needs no read, a claim lists claimable
    entries (`a/`) in the round of settling's listings (`x/`, `d/`): the
    three wait at a barrier for each other. Settling that moves entries
    makes the claim list `a/` again: a delayed message due by now is
    still handed out, by the same claim."""
    queue = make_queue({'_retention': {'time': 3600},
                        '_default_message_delay': 60})
    post(driver, queue, project, 'ready', delay=0)
    post(driver, queue, project, 'due', delay=1)
    store = driver.store
    real_call = store.call
    together = {'x/', 'd/', 'a/'}
    barrier = threading.Barrier(len(together), timeout=10)
    met = []

    def call(method, *args, **kwargs):
        prefix = kwargs.get('prefix') if method == 'get_container' else None
        if prefix in together:
            together.discard(prefix)
            barrier.wait()
            met.append(prefix)
        return real_call(method, *args, **kwargs)

    claim_id, got = claim(driver, queue, project, limit=1)
    assert [m['body'] for m in got] == ['ready']
    monkeypatch.setattr(store, 'call', call)
    claim_id, got = claim(driver, queue, project, limit=1)
    monkeypatch.undo()
    assert sorted(met) == ['a/', 'd/', 'x/']
    assert [m['body'] for m in got] == []
    clock.advance(2)
    claim_id, got = claim(driver, queue, project, limit=1)
    assert [m['body'] for m in got] == ['due']


def test_a_slow_operation_leaves_room_for_another(driver, monkeypatch):
    """Operations running at once (an API worker serving requests on
    several threads) share the driver's pool: one whose requests hang
    (a slow container, a tenant's backlog) keeps max_parallel_requests
    of them in flight, never all its items queued there, and the pool
    holds twice that, so another operation's requests still run. They
    waited behind every one of the first one's before."""
    width = driver.store_conf.max_parallel_requests
    gate, entered, finished = threading.Event(), [], []

    def hang(item):
        entered.append(item)
        gate.wait(30)
        return item

    slow = threading.Thread(target=lambda: finished.append(
        driver.store.parallel(hang, range(3 * width))))
    slow.start()
    try:
        for _ in range(200):
            if len(entered) >= width:
                break
            threading.Event().wait(0.01)
        assert driver.store.parallel(lambda n: n * 2, range(width)) == [
            n * 2 for n in range(width)]
        assert len(entered) == width    # its share, no more
    finally:
        gate.set()
        slow.join(30)
    assert finished == [list(range(3 * width))]


def test_a_failure_in_parallel_stops_what_had_not_started(driver):
    started = []

    def fail_third(n):
        started.append(n)
        if n == 2:
            raise ValueError(n)
        return n

    with pytest.raises(ValueError):
        driver.store.parallel(fail_third, range(100))
    assert len(started) < 100
