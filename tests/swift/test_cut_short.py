"""Swift: calls cut short by a failing request, against a real Swift.

Each test makes one kind of Swift request fail (``cut``: the swiftclient
call raises as if the proxy dropped the connection, after every retry),
at the exact step, and checks what clients and gc see afterwards.
"""

import contextlib
import uuid

import pytest
import swiftclient
from zaqar.storage import errors as storage_errors

from tests.contract.helpers import (CLIENT, bodies, claim, listed, post,
                                    stats)
from zaqar_delay.drivers.swift import drafts
from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import pops

GROUPED = {'_message_group_key': 'g'}


@pytest.fixture
def cut(monkeypatch):
    """``with cut('put_object', 'a/'):`` makes every swiftclient
    ``put_object`` of an object named ``a/...`` fail (optionally in one
    ``container`` only, after the first ``after`` of them, ``times``
    times; with ``landed`` the request is done and its reply lost)."""
    @contextlib.contextmanager
    def cutting(method, prefix='', container=None, after=0, times=None,
                landed=False):
        real = getattr(swiftclient.Connection, method)
        seen = []

        def failing(self, *args, **kwargs):
            name = str(args[1]) if len(args) > 1 else ''
            if (name.startswith(prefix)
                    and container in (None, args[0] if args else None)):
                seen.append(name)
                if after < len(seen) <= after + (times or len(seen)):
                    if landed:
                        real(self, *args, **kwargs)
                    raise ConnectionResetError('cut: {} {}'.format(
                        method, name))
            return real(self, *args, **kwargs)

        with monkeypatch.context() as patch:
            patch.setattr(swiftclient.Connection, method, failing)
            yield seen
    return cutting


@pytest.fixture
def dying(monkeypatch):
    """Posts cut short in the test die with their request, so they do not
    take back what they left (drafts.withdraw): gc's part is tested."""
    monkeypatch.setattr(drafts, 'withdraw', lambda qs, messages, now: None)


def objects(driver, queue, project, prefix=''):
    container = names.container(names.MESSAGES, queue, project)
    return [e['name'] for e in driver.store.listing_all(container, prefix)]


def gc(driver, queue, project, clock):
    """gc of one queue once every lock and draft is old enough to act on
    (driver.gc() walks every queue of the session's Swift)."""
    clock.advance(600)
    driver._gc_queue(names.container(names.MESSAGES, queue, project))


# -- pops -------------------------------------------------------------------

def test_a_pop_whose_removal_fails_hands_out_what_it_won(
        driver, make_queue, project, clock, cut):
    queue = make_queue()
    post(driver, queue, project, 'a', 'b', ttl=3600)
    # Removal is one bulk delete (POST to the account), or one DELETE each
    # without the bulk middleware.
    with cut('post_account'), cut('delete_object'):
        got = driver.message_controller.pop(queue, 5, project=project)
    assert bodies(got) == ['a', 'b']
    gc(driver, queue, project, clock)
    assert claim(driver, queue, project) == (None, [])
    assert stats(driver, queue, project)['total'] == 0
    assert objects(driver, queue, project, 'm/') == []


def test_gc_gives_back_what_a_pop_that_failed_had_locked(
        driver, make_queue, project, clock, cut):
    queue = make_queue()
    post(driver, queue, project, 'a', 'b', ttl=3600)
    # The pop has locked both, then cannot read them.
    with cut('get_object', 'm/'):
        with pytest.raises(storage_errors.ConnectionError):
            driver.message_controller.pop(queue, 5, project=project)
    assert claim(driver, queue, project) == (None, [])
    gc(driver, queue, project, clock)
    assert bodies(claim(driver, queue, project)[1]) == ['a', 'b']


def test_a_pop_whose_outcome_reply_is_lost_still_hands_out(
        driver, make_queue, project, clock, cut, monkeypatch):
    """Its outcome PUT landed, the replies to it and to a retry were
    lost: the pop asks again (within OUTCOME_PATIENCE_S), reads done,
    and answers with the messages gc would otherwise remove."""
    monkeypatch.setattr(pops, 'OUTCOME_RETRY_S', 0)
    queue = make_queue()
    post(driver, queue, project, 'a', ttl=3600)
    with cut('put_object', 'o/', landed=True, times=2):
        got = driver.message_controller.pop(queue, 5, project=project)
    assert bodies(got) == ['a']
    gc(driver, queue, project, clock)
    assert stats(driver, queue, project)['total'] == 0
    assert claim(driver, queue, project) == (None, [])


def test_a_pop_that_gc_took_for_dead_hands_out_nothing(
        driver, make_queue, project, clock, monkeypatch):
    queue = make_queue()
    post(driver, queue, project, 'a', ttl=3600)
    real = pops.finish

    def late(qs, pop_id, won, now):
        # The pop stalls past gc's patience; gc releases its messages.
        gc(driver, queue, project, clock)
        return real(qs, pop_id, won, now)

    monkeypatch.setattr(pops, 'finish', late)
    assert driver.message_controller.pop(queue, 5, project=project) == []
    monkeypatch.undo()
    assert bodies(claim(driver, queue, project)[1]) == ['a']


def test_gc_finishes_a_pop_that_answered(driver, make_queue, project,
                                         clock, cut):
    """The outcome is written before the removal: once it says done, gc
    removes, it never gives back."""
    queue = make_queue(GROUPED)
    post(driver, queue, project, {'g': 'x', 'n': 1}, {'g': 'x', 'n': 2},
         ttl=3600)
    with cut('post_account'), cut('delete_object'):
        got = driver.message_controller.pop(queue, 5, project=project)
    assert bodies(got) == [{'g': 'x', 'n': 1}]
    gc(driver, queue, project, clock)
    assert bodies(claim(driver, queue, project)[1]) == [{'g': 'x', 'n': 2}]


def test_gc_finishes_a_pop_removal_that_took_only_the_message(
        driver, make_queue, project, clock, cut):
    queue = make_queue()
    post(driver, queue, project, 'a', ttl=3600)
    with cut('post_account'), cut('delete_object'):
        [got] = driver.message_controller.pop(queue, 5, project=project)
    # Its bulk delete took the message only (the proxy died midway).
    driver.store.delete(names.container(names.MESSAGES, queue, project),
                        names.message_obj(got['id']))
    gc(driver, queue, project, clock)
    assert stats(driver, queue, project)['total'] == 0
    assert objects(driver, queue, project, 'p/') == []
    assert objects(driver, queue, project, 'l/') == []

# -- posts ------------------------------------------------------------------

def test_a_post_cut_short_before_its_message_leaves_nothing_visible(
        driver, make_queue, project, clock, cut, dying):
    queue = make_queue()
    with cut('put_object', 'm/'):
        with pytest.raises(storage_errors.ConnectionError):
            post(driver, queue, project, 'lost', ttl=3600)
    assert objects(driver, queue, project, 'p/'), 'the position was taken'
    assert stats(driver, queue, project)['total'] == 0
    assert listed(driver, queue, project, include_claimed=True,
                  include_delayed=True) == []
    gc(driver, queue, project, clock)
    assert objects(driver, queue, project) == [names.GC_SUMMARY]


def test_a_post_cut_short_before_filing_leaves_nothing_visible(
        driver, make_queue, project, clock, cut, dying):
    queue = make_queue()
    with cut('put_object', 'a/'), cut('put_object', 'd/'):
        with pytest.raises(storage_errors.ConnectionError):
            post(driver, queue, project, 'draft', ttl=3600)
    [stored] = objects(driver, queue, project, 'm/')
    draft_id = names.parse.unquote(stored[2:])
    assert stats(driver, queue, project)['total'] == 0
    assert listed(driver, queue, project, include_claimed=True,
                  include_delayed=True) == []
    assert list(driver.message_controller.bulk_get(
        queue, [draft_id], project=project)) == []
    with pytest.raises(storage_errors.QueueIsEmpty):
        driver.message_controller.first(queue, project=project)
    post(driver, queue, project, 'next', ttl=3600)
    assert stats(driver, queue, project)['total'] == 1
    gc(driver, queue, project, clock)
    assert objects(driver, queue, project, 'm/') == [
        names.message_obj(m['id']) for m in listed(driver, queue, project)]
    assert bodies(claim(driver, queue, project)[1]) == ['next']


def test_a_failing_post_takes_back_its_drafts_and_pushes_nothing_out(
        driver, make_queue, project, cut):
    """SPEC 5: a failed post's positions counted in the length cut until
    gc removed them (60 s on), and a cut stored meanwhile (here by the
    claim) kept the older messages out for good."""
    queue = make_queue({'_retention': {'length': 3}})
    post(driver, queue, project, 'a', 'b', 'c', ttl=3600)
    with cut('put_object', 'a/'):
        with pytest.raises(storage_errors.ConnectionError):
            post(driver, queue, project, 'd', 'e', 'f', ttl=3600)
    assert bodies(claim(driver, queue, project)[1]) == ['a', 'b', 'c']
    assert len(objects(driver, queue, project, 'p/')) == 3
    assert len(objects(driver, queue, project, 'm/')) == 3


def test_a_failing_post_leaves_what_it_filed(driver, make_queue, project,
                                             cut):
    queue = make_queue({'_default_message_delay': 60})
    with cut('put_object', 'a/'):
        with pytest.raises(storage_errors.ConnectionError):
            driver.message_controller.post(queue, [
                {'ttl': 3600, 'body': 'later'},
                {'ttl': 3600, 'body': 'now', 'delay': 0}], CLIENT,
                project=project)
    # The delayed one was filed (d/): a message, whatever its post said.
    assert bodies(listed(driver, queue, project,
                         include_delayed=True)) == ['later']
    assert len(objects(driver, queue, project, 'p/')) == 1
    assert len(objects(driver, queue, project, 'm/')) == 1


def test_a_member_stored_outside_its_group_never_joins_it_late(
        driver, make_queue, project, clock, cut):
    """The post of member 1 dies after storing it, before its group entry:
    member 2, posted after, is the group; gc removes member 1, it never
    comes out after member 2."""
    queue = make_queue(GROUPED)
    with cut('put_object', 'g/'):
        with pytest.raises(storage_errors.ConnectionError):
            post(driver, queue, project, {'g': 'x', 'n': 1}, ttl=3600)
    post(driver, queue, project, {'g': 'x', 'n': 2}, ttl=3600)
    assert stats(driver, queue, project)['total'] == 1
    assert bodies(listed(driver, queue, project)) == [{'g': 'x', 'n': 2}]
    claim_id, got = claim(driver, queue, project)
    assert bodies(got) == [{'g': 'x', 'n': 2}]
    driver.message_controller.delete(queue, got[0]['id'], project=project,
                                     claim=claim_id)
    gc(driver, queue, project, clock)
    assert claim(driver, queue, project) == (None, [])
    assert objects(driver, queue, project) == [names.GC_SUMMARY]


def dead_letter_copy_cut_short(driver, make_queue, project, clock, cut,
                               **metadata):
    """A queue whose 'poison' message's dead-letter copy is stored in the
    dead-letter queue (with its r/ marker), not yet filed: (queue, dlq)."""
    dlq = make_queue()
    queue = make_queue(dict(metadata, _max_claim_count=1,
                            _dead_letter_queue=dlq))
    post(driver, queue, project, 'poison', ttl=3600, delay=0)
    claim(driver, queue, project, ttl=60)
    clock.advance(61)
    dlq_container = names.container(names.MESSAGES, dlq, project)
    with cut('put_object', 'a/', container=dlq_container):
        with pytest.raises(storage_errors.ConnectionError):
            claim(driver, queue, project)
    return queue, dlq


def test_a_dead_letter_copy_cut_short_is_finished_by_gc(
        driver, make_queue, project, clock, cut):
    queue, dlq = dead_letter_copy_cut_short(driver, make_queue, project,
                                            clock, cut)
    assert stats(driver, dlq, project)['total'] == 0
    gc(driver, queue, project, clock)
    gc(driver, dlq, project, clock)
    assert bodies(driver.message_controller.pop(
        dlq, 5, project=project)) == ['poison']
    assert listed(driver, queue, project, include_claimed=True) == []


def test_gc_removes_drafts_in_bounded_batches(driver, make_queue, project,
                                               clock, cut, monkeypatch,
                                               dying):
    from zaqar_delay.drivers.swift import state
    queue = make_queue()
    with cut('put_object', 'a/'), cut('put_object', 'd/'):
        for body in ('x', 'y', 'z'):
            # One post each: a post's requests run in parallel, and its
            # other messages could be filed after the first one failed.
            with pytest.raises(storage_errors.ConnectionError):
                post(driver, queue, project, body, ttl=3600)
    assert len(objects(driver, queue, project, 'm/')) == 3
    monkeypatch.setattr(state, 'SETTLE_BATCH', 2)
    gc(driver, queue, project, clock)
    assert len(objects(driver, queue, project, 'm/')) == 1
    gc(driver, queue, project, clock)
    assert objects(driver, queue, project) == [names.GC_SUMMARY]


def test_a_consumer_page_stops_before_a_post_still_being_written(
        driver, make_queue, project, clock, cut, dying):
    # A post that has taken its position but not filed its message yet
    # (here: cut short before filing, which looks the same for
    # DRAFT_AGE_S) sits between two messages: the consumer is not handed
    # the later one, so its cursor cannot pass the draft.
    from tests.contract.test_consumers import Reader
    queue = make_queue()
    reader = Reader(driver, queue, project)
    post(driver, queue, project, 'a', ttl=3600)
    with cut('put_object', 'a/'), cut('put_object', 'd/'):
        with pytest.raises(storage_errors.ConnectionError):
            post(driver, queue, project, 'draft', ttl=3600)
    post(driver, queue, project, 'c', ttl=3600)
    got, marker = reader.page()
    assert got == ['a']
    assert reader.page(marker) == ([], marker)
    # A plain listing does not wait.
    assert bodies(listed(driver, queue, project)) == ['a', 'c']
    # A draft older than DRAFT_AGE_S is a post that died (never
    # acknowledged): no longer waited for.
    clock.advance(61)
    assert reader.page(marker)[0] == ['c']


def test_a_group_member_whose_removal_was_cut_short_does_not_block_it(
        driver, make_queue, project, clock):
    """A delete's bulk request cut after the member's g/ and p/ entries
    went (they go first), the client told it failed: the claim's expiry
    files the member again, out of its group. Claims used to take it for
    its group's candidate, find it was not the head, and skip the group
    for good."""
    queue = make_queue(GROUPED)
    first, _ = post(driver, queue, project, {'g': 'x', 'n': 1},
                    {'g': 'x', 'n': 2}, ttl=3600)
    claim_id, got = claim(driver, queue, project)
    assert bodies(got) == [{'g': 'x', 'n': 1}]
    container = names.container(names.MESSAGES, queue, project)
    member = [name for name in objects(driver, queue, project, 'g/')
              if name.endswith('/' + first)]
    position = [name for name in objects(driver, queue, project, 'p/')
                if driver.store.head(container, name)['content-type']
                .find('id=' + first) >= 0]
    driver.store.delete_many(container, member + position)
    clock.advance(700)     # the claim (600 s + 30 s grace) ends
    assert bodies(claim(driver, queue, project)[1]) == [{'g': 'x', 'n': 2}]
    # The cut-short removal was finished: the member is gone for good.
    assert names.message_obj(first) not in objects(driver, queue, project,
                                                   'm/')


def test_a_stale_entry_of_a_removed_group_member_does_not_block_it(
        driver, make_queue, project):
    """A claim's expiry that read the member's last lock before a pop
    removed the member files its next attempt after the removal: an
    ``a/<pos>/<id>/3`` entry of a message with no g/, m/ or lock left (the
    long Swift fault run, issue 19: its group stuck 300 s into the drain).
    Claims took it for its group's candidate, finished "its removal" with
    the attempts its locks gave (none, so only ``a/.../1`` went) and left
    the entry, skipping the group for good."""
    from zaqar_delay import rules
    queue = make_queue(GROUPED)
    first, _ = post(driver, queue, project, {'g': 'x', 'n': 1},
                    {'g': 'x', 'n': 2}, ttl=3600)
    qs = driver.queue_state(queue, project)
    now = driver.now_ms()
    position = qs.lookup(first, now)[0].pos
    assert bodies(driver.message_controller.pop(queue, 1, project=project)
                  ) == [{'g': 'x', 'n': 1}]
    stale = names.avail_obj(position, first, 3)
    qs.make_available(position, first, 3, now, now,
                      gk=names.group_key(rules.encode_group_id('x')))
    got = [bodies(claim(driver, queue, project)[1]) for _ in range(2)]
    assert [{'g': 'x', 'n': 2}] in got
    assert stale not in objects(driver, queue, project, 'a/')


def delete_all_but(driver, monkeypatch, prefix, queue, project, message_id,
                   claim_id):
    """A delete of ``message_id`` by its claimer whose bulk delete removes
    every object but those under ``prefix``, and fails (Swift's bulk
    delete fails object by object)."""
    from zaqar_delay import errors
    real = driver.store.delete_many

    def partly(container, doomed):
        real(container, [n for n in doomed if not n.startswith(prefix)])
        raise errors.BackendUnavailable(
            backend='Swift', reason='bulk delete failed: ' + prefix)

    monkeypatch.setattr(driver.store, 'delete_many', partly)
    with pytest.raises(errors.BackendUnavailable):
        driver.message_controller.delete(queue, message_id,
                                         project=project, claim=claim_id)
    monkeypatch.setattr(driver.store, 'delete_many', real)


@pytest.mark.parametrize('kept', ['m/', 'l/'])
def test_a_delete_whose_bulk_delete_failed_midway_is_finished_by_its_retry(
        driver, make_queue, project, monkeypatch, kept):
    # Swift's bulk delete fails object by object: here it removed every
    # object of the message but its ``m/`` (the locks went: the retry must
    # finish the removal, not be told the message is not claimed) or but
    # its lock (the message went: the retry goes by the claim's record,
    # and removes the lock instead of leaving it to gc), and answered 503.
    queue = make_queue()
    post(driver, queue, project, 'x')
    claim_id, got = claim(driver, queue, project)
    delete_all_but(driver, monkeypatch, kept, queue, project, got[0]['id'],
                   claim_id)
    assert objects(driver, queue, project, kept) != []
    driver.message_controller.delete(queue, got[0]['id'], project=project,
                                     claim=claim_id)
    assert objects(driver, queue, project, 'm/') == []
    assert objects(driver, queue, project, 'l/') == []
    assert list(driver.message_controller.bulk_get(
        queue, [got[0]['id']], project=project)) == []
    assert claim(driver, queue, project) == (None, [])


def failing_bulk_deletes(driver, monkeypatch, prefix):
    """Swift fails every bulk delete of names under ``prefix`` only."""
    from zaqar_delay import errors
    real = driver.store.delete_many

    def failing(container, doomed):
        doomed = list(doomed)
        if doomed and all(n.startswith(prefix) for n in doomed):
            raise errors.BackendUnavailable(backend='Swift', reason='503')
        return real(container, doomed)

    monkeypatch.setattr(driver.store, 'delete_many', failing)


def test_a_claim_whose_filings_could_not_be_deleted_still_hands_out(
        driver, make_queue, project, monkeypatch):
    # The claim won its locks; deleting the filings it won failed in
    # Swift. Those entries only cost the next claim a request: the claim
    # hands its messages out, the next claim finds nothing, and the
    # claimer's delete works.
    queue = make_queue()
    post(driver, queue, project, 'x', 'y')
    failing_bulk_deletes(driver, monkeypatch, 'a/')
    claim_id, got = claim(driver, queue, project)
    monkeypatch.undo()
    assert bodies(got) == ['x', 'y']
    assert claim(driver, queue, project) == (None, [])
    for message in got:
        driver.message_controller.delete(queue, message['id'],
                                         project=project, claim=claim_id)
    assert stats(driver, queue, project)['total'] == 0


def test_a_claim_whose_settle_could_not_delete_promoted_entries_hands_out(
        driver, clock, make_queue, project, monkeypatch):
    # Settling filed two due delayed messages under a/, then deleting
    # their d/ entries failed in Swift. The claim still hands them out
    # (a d/ entry left is filed again by the next settle, under the same
    # name, and the claim that meets it drops it: its lock exists).
    queue = make_queue({'_default_message_delay': 60})
    post(driver, queue, project, 'x', 'y', delay=1)
    clock.advance(2)
    store = driver.store
    failing_bulk_deletes(driver, monkeypatch, 'd/')
    claim_id, got = claim(driver, queue, project)
    monkeypatch.undo()
    assert bodies(got) == ['x', 'y']
    qs = driver.queue_state(queue, project)
    assert len(store.listing_all(qs.c, 'd/')) == 2
    assert claim(driver, queue, project) == (None, [])
    assert store.listing_all(qs.c, 'd/') == []
    for message in got:
        driver.message_controller.delete(queue, message['id'],
                                         project=project, claim=claim_id)
    assert stats(driver, queue, project)['total'] == 0
    assert claim(driver, queue, project) == (None, [])


def test_a_grouped_delete_cut_short_after_its_message_went_frees_the_group(
        driver, make_queue, project, monkeypatch):
    # The bulk delete removed the head's group entry, position and
    # message, not its lock, and answered 503. The retry (same claim)
    # has only the claim's record to go by: the group key it holds must
    # advance the group, so the next member is claimable at once.
    queue = make_queue(GROUPED)
    post(driver, queue, project, {'g': 'x', 'n': 1}, {'g': 'x', 'n': 2},
         ttl=3600)
    claim_id, got = claim(driver, queue, project)
    assert bodies(got) == [{'g': 'x', 'n': 1}]
    delete_all_but(driver, monkeypatch, 'l/', queue, project, got[0]['id'],
                   claim_id)
    driver.message_controller.delete(queue, got[0]['id'], project=project,
                                     claim=claim_id)
    assert objects(driver, queue, project, 'l/') == []
    assert bodies(claim(driver, queue, project)[1]) == [{'g': 'x', 'n': 2}]


def test_a_head_filed_for_its_expiry_whose_removal_was_cut_short(
        driver, make_queue, project, clock):
    # A removal died after the head's m/ went, before its group entry
    # did. The claim that meets the head's filing (filed for its expiry:
    # never handed out) finishes that removal, so the group goes on now,
    # not at gc's next deep pass.
    queue = make_queue(dict(GROUPED, _default_message_delay=120))
    [head] = post(driver, queue, project, {'g': 'x', 'n': 1}, ttl=60)
    post(driver, queue, project, {'g': 'x', 'n': 2}, ttl=600, delay=0)
    container = names.container(names.MESSAGES, queue, project)
    driver.store.delete_many(container, [names.message_obj(head)])
    clock.advance(61)
    assert bodies(claim(driver, queue, project)[1]) == [{'g': 'x', 'n': 2}]
    assert [n for n in objects(driver, queue, project, 'g/')
            if n.endswith('/' + head)] == []


def test_a_claim_that_cannot_read_a_head_filed_for_its_expiry_goes_on(
        driver, make_queue, project, clock, monkeypatch):
    # Dropping such a head is cleanup: Swift failing the read leaves it
    # to the next claim, and this one still hands out what it found.
    from zaqar_delay import errors
    from zaqar_delay.drivers.swift import state
    queue = make_queue(dict(GROUPED, _default_message_delay=120))
    [head] = post(driver, queue, project, {'g': 'x', 'n': 1}, ttl=60)
    post(driver, queue, project, 'free', ttl=600, delay=0)
    clock.advance(61)
    real_lookup = state.QueueState.lookup

    def lookup(qs, message_id, now):
        if message_id == head:
            raise errors.BackendUnavailable(backend='Swift', reason='503')
        return real_lookup(qs, message_id, now)

    monkeypatch.setattr(state.QueueState, 'lookup', lookup)
    assert bodies(claim(driver, queue, project)[1]) == ['free']
    monkeypatch.undo()
    assert claim(driver, queue, project) == (None, [])
    assert objects(driver, queue, project, 'a/') == []


def test_gc_finishes_a_dead_letter_move_after_the_delay_bound_was_lowered(
        driver, make_queue, project, clock, cut):
    # gc read the queue's strict policy to finish the move: once the
    # operator lowered max_message_delay below its stored delay, every
    # pass skipped the queue and the dead letter stayed invisible.
    _, dlq = dead_letter_copy_cut_short(driver, make_queue, project, clock,
                                        cut, _default_message_delay=300)
    driver.conf.set_override('max_message_delay', 60, group='transport')
    clock.advance(61)
    assert driver.gc().skipped == 0
    gc(driver, dlq, project, clock)
    assert bodies(driver.message_controller.pop(
        dlq, 5, project=project)) == ['poison']


def test_a_listing_shows_a_message_filed_twice_once(driver, make_queue,
                                                    project, cut):
    """A claim that could not delete the filings it locked still hands
    its messages out (its attempt-1 filings stay); released, they are
    filed again as attempt 2. A listing read both filings of one message
    when a page boundary fell between them, and showed it twice."""
    mine = uuid.UUID('33333333-3333-4333-8333-333333333333')
    queue = make_queue()
    post(driver, queue, project, 'mine', ttl=3600, client=mine)
    post(driver, queue, project, 'target', ttl=3600)
    with cut('post_account'), cut('delete_object'):
        claim_id, got = claim(driver, queue, project, limit=2)
    assert bodies(got) == ['mine', 'target']
    driver.claim_controller.delete(queue, claim_id, project=project)
    # Its own message skipped (echo off), a page of 3 entries ends
    # between the two filings of 'target'.
    pages = driver.message_controller.list(
        queue, project=project, limit=3, echo=False, client_uuid=mine)
    assert bodies(next(pages)) == ['target']
