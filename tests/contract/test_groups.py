"""SPEC §4: message groups."""

import pytest
from zaqar.storage import errors as storage_errors

from tests.contract.helpers import CLIENT, claim, listed, post, stats
from zaqar_delay import errors

GROUPED = {'_message_group_key': 'g'}


def msg(group, n, **extra):
    return dict({'g': group, 'n': n}, **extra)


def names(messages):
    return ['%s%s' % (m['body'].get('g', '-'), m['body']['n'])
            if isinstance(m['body'], dict) else m['body'] for m in messages]


def test_one_message_per_group_in_posting_order(driver, make_queue,
                                                project):
    queue = make_queue(GROUPED)
    ids = post(driver, queue, project, msg('a', 1), msg('a', 2), msg('b', 1),
               {'n': 'free'}, msg('a', 3), 'not an object')
    claim_id, got = claim(driver, queue, project)
    assert names(got) == ['a1', 'b1', '-free', 'not an object']
    assert claim(driver, queue, project) == (None, [])
    driver.message_controller.delete(queue, ids[0], project=project,
                                     claim=claim_id)
    assert names(claim(driver, queue, project)[1]) == ['a2']


def test_claimed_head_blocks_its_group_until_release_or_expiry(
        driver, make_queue, project, clock):
    queue = make_queue(GROUPED)
    post(driver, queue, project, msg('a', 1), msg('a', 2))
    claim_id, _ = claim(driver, queue, project, ttl=60)
    assert claim(driver, queue, project) == (None, [])
    driver.claim_controller.delete(queue, claim_id, project=project)
    _, got = claim(driver, queue, project, ttl=60)
    assert names(got) == ['a1'] and got[0]['claim_count'] == 2
    clock.advance(60)
    _, got = claim(driver, queue, project)
    assert names(got) == ['a1'] and got[0]['claim_count'] == 3


def test_delayed_head_blocks_its_group_until_due(driver, make_queue,
                                                 project, clock):
    queue = make_queue(dict(GROUPED, _default_message_delay=30))
    post(driver, queue, project, msg('a', 1))
    post(driver, queue, project, msg('a', 2), msg('b', 1), delay=0)
    assert names(claim(driver, queue, project)[1]) == ['b1']
    clock.advance(30)
    assert names(claim(driver, queue, project)[1]) == ['a1']


@pytest.mark.parametrize('waiting', ['ready', 'delayed', 'redelivered'])
def test_expired_head_unblocks_the_next(driver, make_queue, project, clock,
                                        waiting):
    # SPEC §4: once the head expired, the next member is claimable. Also
    # when it expired while it waited to fall due (§3: ttl < delay, never
    # claimable), or to be redelivered (its claim's end left it more
    # redelivery delay than ttl): from its expiry, not from when it would
    # have been due.
    queue = make_queue(dict(GROUPED, _default_message_delay=120)
                       if waiting == 'delayed' else
                       dict(GROUPED, _redelivery_delay=300))
    post(driver, queue, project, msg('a', 1), ttl=60)
    post(driver, queue, project, msg('a', 2), ttl=600, delay=0)
    if waiting == 'redelivered':
        claim(driver, queue, project, ttl=30, grace=0)
        clock.advance(31)
    if waiting != 'ready':
        assert claim(driver, queue, project) == (None, [])
    clock.advance(61)
    assert names(claim(driver, queue, project)[1]) == ['a2']


def test_dead_lettered_head_unblocks_the_next(driver, make_queue, project,
                                              clock):
    dlq = make_queue()
    queue = make_queue(dict(GROUPED, _max_claim_count=1,
                            _dead_letter_queue=dlq))
    post(driver, queue, project, msg('a', 1), msg('a', 2))
    claim(driver, queue, project, ttl=60)
    clock.advance(60)
    assert names(claim(driver, queue, project)[1]) == ['a2']
    assert names(listed(driver, dlq, project)) == ['a1']


def test_deleting_a_blocked_message_keeps_the_head(driver, make_queue,
                                                   project):
    queue = make_queue(GROUPED)
    ids = post(driver, queue, project, msg('a', 1), msg('a', 2), msg('a', 3))
    driver.message_controller.delete(queue, ids[1], project=project)
    claim_id, got = claim(driver, queue, project)
    assert names(got) == ['a1']
    driver.message_controller.delete(queue, ids[0], project=project,
                                     claim=claim_id)
    assert names(claim(driver, queue, project)[1]) == ['a3']


def test_pop_takes_one_message_per_group(driver, make_queue, project):
    queue = make_queue(GROUPED)
    post(driver, queue, project, msg('a', 1), msg('a', 2), msg('b', 1))
    assert names(driver.message_controller.pop(queue, 10, project=project)) \
        == ['a1', 'b1']
    assert names(driver.message_controller.pop(queue, 10, project=project)) \
        == ['a2']


def test_pops_of_one_take_heads_only_and_advance_their_group(
        driver, make_queue, project):
    # A pop of one (on MongoDB a findAndModify of one, claims.py) takes
    # only a head: a group whose head is claimed gives it nothing, and a
    # popped head hands its group on.
    queue = make_queue(GROUPED)
    post(driver, queue, project, msg('a', 1), msg('a', 2), msg('b', 1),
         msg('b', 2))

    def pop_one():
        return names(driver.message_controller.pop(queue, 1,
                                                   project=project))

    claim_id, held = claim(driver, queue, project, limit=1)
    assert names(held) == ['a1']
    assert pop_one() == ['b1']
    assert pop_one() == ['b2']
    assert pop_one() == []   # a2 waits behind a1, claimed
    driver.message_controller.delete(queue, held[0]['id'], project=project,
                                     claim=claim_id)
    assert pop_one() == ['a2']
    assert pop_one() == []


def test_listing_shows_blocked_messages(driver, make_queue, project):
    queue = make_queue(GROUPED)
    post(driver, queue, project, msg('a', 1), msg('a', 2))
    claim(driver, queue, project)
    assert names(listed(driver, queue, project)) == ['a2']
    assert names(listed(driver, queue, project, include_claimed=True)) == [
        'a1', 'a2']


def test_string_and_integer_group_ids_are_distinct(driver, make_queue,
                                                   project):
    queue = make_queue(GROUPED)
    post(driver, queue, project, msg('1', 'x'), msg(1, 'y'), msg('1', 'z'))
    assert names(claim(driver, queue, project)[1]) == ['1x', '1y']


@pytest.mark.parametrize('group_id', [
    '$where', 'a.b', 'a}b{c', 'zd:{x/y}:msgs', ':m:', '\u2603\U0001F600',
    '', 'x' * 254, -7, 2 ** 62])
def test_odd_group_ids_are_data(driver, make_queue, project, group_id):
    queue = make_queue(GROUPED)
    post(driver, queue, project, msg(group_id, 1), msg(group_id, 2),
         msg('plain', 1))
    assert names(claim(driver, queue, project)[1]) == [
        '%s1' % group_id, 'plain1']
    groups = {g['id']: g for g in next(driver.message_controller.list_groups(
        queue, project=project))}
    assert groups[group_id]['depth'] == 2 and groups['plain']['depth'] == 1


# 'x' * 255 is 257 characters of JSON, one past the bound ('x' * 254 above
# is exactly 256).
@pytest.mark.parametrize('bad', [1.5, True, ['a'], {'$gt': ''}, 'x' * 255])
def test_bad_group_ids_are_refused_and_nothing_is_stored(
        driver, make_queue, project, bad):
    queue = make_queue(GROUPED)
    with pytest.raises(errors.InvalidInput, match='group id'):
        driver.message_controller.post(
            queue, [{'ttl': 60, 'body': msg('ok', 1)},
                    {'ttl': 60, 'body': msg(bad, 2)}], CLIENT,
            project=project)
    assert stats(driver, queue, project)['total'] == 0


@pytest.mark.parametrize('bad', [5, '', 'k' * 300, ['g']])
def test_bad_group_key_is_refused_at_post(driver, make_queue, project, bad):
    queue = make_queue({'_message_group_key': bad})
    with pytest.raises(errors.InvalidInput, match='_message_group_key'):
        post(driver, queue, project, msg('a', 1))
    assert stats(driver, queue, project)['total'] == 0


def test_list_groups_pages_and_reports_heads(driver, make_queue, project):
    queue = make_queue(GROUPED)
    ids = post(driver, queue, project, msg('a', 1), msg('a', 2), msg('b', 1),
               msg('c', 1))
    claim(driver, queue, project, limit=1)
    pages = driver.message_controller.list_groups(queue, project=project,
                                                  limit=2)
    first = list(next(pages))
    marker = next(pages)
    rest = list(next(driver.message_controller.list_groups(
        queue, project=project, limit=2, marker=marker)))
    assert [(g['id'], g['depth'], g['head'], g['in_flight'])
            for g in first + rest] == [('a', 2, ids[0], True),
                                       ('b', 1, ids[2], False),
                                       ('c', 1, ids[3], False)]


def test_stats_count_groups(driver, make_queue, project):
    queue = make_queue(GROUPED)
    post(driver, queue, project, msg('a', 1), msg('a', 2), msg('b', 1), 'u')
    claim(driver, queue, project, limit=1)
    counts = stats(driver, queue, project)
    assert (counts['groups'], counts['groups_in_flight']) == (2, 1)


def test_purge_group_deletes_only_that_group(driver, make_queue, project):
    queue = make_queue(GROUPED)
    post(driver, queue, project, msg('a', 1), msg('b', 1), msg('a', 2))
    claim(driver, queue, project, limit=1)
    assert driver.message_controller.purge_group(queue, 'a',
                                                 project=project) == 2
    assert names(listed(driver, queue, project, include_claimed=True)) == [
        'b1']
    assert stats(driver, queue, project)['groups'] == 1


def test_move_group_keeps_order_ids_and_ttl(driver, make_queue, project,
                                            clock):
    target = make_queue(GROUPED)
    queue = make_queue(GROUPED)
    ids = post(driver, queue, project, msg('a', 1), msg('b', 1), msg('a', 2),
               msg('a', 3), ttl=100)
    clock.advance(40)
    messages = driver.message_controller
    assert messages.move_group(queue, 'a', target, project=project) == 3
    moved = listed(driver, target, project)
    assert [m['id'] for m in moved] == [ids[0], ids[2], ids[3]]
    assert all(m['ttl'] == 60 for m in moved)
    assert names(listed(driver, queue, project)) == ['b1']
    assert names(claim(driver, target, project)[1]) == ['a1']


def test_move_group_refuses_a_claimed_head_and_moves_nothing(
        driver, make_queue, project):
    target = make_queue()
    queue = make_queue(GROUPED)
    post(driver, queue, project, msg('a', 1), msg('a', 2))
    claim(driver, queue, project)
    with pytest.raises(errors.GroupInFlight):
        driver.message_controller.move_group(queue, 'a', target,
                                             project=project)
    assert stats(driver, queue, project)['total'] == 2
    assert listed(driver, target, project) == []


def test_move_group_needs_another_existing_queue(driver, make_queue,
                                                 project):
    queue = make_queue(GROUPED)
    post(driver, queue, project, msg('a', 1))
    with pytest.raises(errors.InvalidInput):
        driver.message_controller.move_group(queue, 'a', queue,
                                             project=project)
    with pytest.raises(storage_errors.QueueDoesNotExist):
        driver.message_controller.move_group(queue, 'a', 'no-such-queue',
                                             project=project)
    assert stats(driver, queue, project)['total'] == 1
