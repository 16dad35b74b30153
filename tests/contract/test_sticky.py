"""SPEC §4, sticky consumers: on a queue with ``_message_group_sticky``, a
group's messages go to the client that took one of them while it stays
active (claims, renews or deletes within the sticky time)."""

import pytest
from zaqar.api.v2 import endpoints
from zaqar.common.api import request as api_request

from tests.contract.helpers import claim, listed, post, stats, zaqar_purge
from tests.contract.test_consumers import Reader
from zaqar_delay import errors
from zaqar_delay import rules
from zaqar_delay import stages
from zaqar_delay import sticky

STICKY_S = 60
STICKY = {'_message_group_key': 'g', '_message_group_sticky': STICKY_S}
ALICE, BOB = 'alice-client', 'bob-client'


def msg(group, n):
    return {'g': group, 'n': n}


def names(messages):
    return ['%s%s' % (m['body']['g'], m['body']['n']) for m in messages]


def claim_as(client, driver, queue, project, **kwargs):
    with sticky.acting_as(client):
        return claim(driver, queue, project, **kwargs)


def delete_as(client, driver, queue, project, messages, claim_id):
    with sticky.acting_as(client):
        for message in messages:
            driver.message_controller.delete(queue, message['id'],
                                             project=project, claim=claim_id)


@pytest.fixture
def sticky_queue(driver, make_queue, request):
    if not driver.message_controller.STICKY_GROUPS:
        # Tracked, not skipped: the day a backend implements sticky
        # groups, these pass and the strict mark says to remove it.
        request.applymarker(pytest.mark.xfail(
            strict=True, reason='sticky groups are not implemented on '
            'this backend yet (issue 23)'))

    def make(**extra):
        return make_queue(dict(STICKY, **extra))
    return make


def assert_refused_at_put_and_patch(driver, make_queue, project, metadata,
                                    reason):
    stage = stages.QueueStage(driver, driver.control_driver)
    with pytest.raises(errors.RefusedQueueAttributes, match=reason):
        stage.create('q-refused', metadata, project)
    queue = make_queue()
    with pytest.raises(errors.InvalidInput, match=reason):
        stage.set_metadata(queue, metadata, project)


BAD_STICKY = [0, -1, True, 1.5, '60', rules.MAX_STICKY + 1]


@pytest.mark.parametrize('value', BAD_STICKY)
def test_a_bad_sticky_time_is_refused_at_put_and_patch(driver, make_queue,
                                                       project, value):
    metadata = {'_message_group_key': 'g', '_message_group_sticky': value}
    assert_refused_at_put_and_patch(driver, make_queue, project, metadata,
                                    '_message_group_sticky')


def test_sticky_without_a_group_key_is_refused(driver, project):
    stage = stages.QueueStage(driver, driver.control_driver)
    with pytest.raises(errors.InvalidInput, match='_message_group_key'):
        stage.create('q-nokey', {'_message_group_sticky': 60}, project)


def test_a_backend_without_sticky_groups_refuses_the_attribute(
        driver, make_queue, project):
    if driver.message_controller.STICKY_GROUPS:
        # It implements them: the attribute is taken at PUT and PATCH.
        stage = stages.QueueStage(driver, driver.control_driver)
        stage.create('q-sticky', STICKY, project)
        stage.set_metadata(make_queue(), STICKY, project)
        return
    assert_refused_at_put_and_patch(driver, make_queue, project, STICKY,
                                    'not implemented')


def test_a_valid_sticky_time_is_accepted(sticky_queue, driver, project):
    stage = stages.QueueStage(driver, driver.control_driver)
    stage.create('q-ok', STICKY, project)
    stage.set_metadata('q-ok', dict(STICKY, _message_group_sticky=1),
                       project)


def test_a_claim_or_pop_without_a_client_is_refused(sticky_queue, driver,
                                                    project):
    queue = sticky_queue()
    post(driver, queue, project, msg('a', 1))
    with pytest.raises(errors.InvalidInput, match='Client-ID'):
        claim(driver, queue, project)
    with pytest.raises(errors.InvalidInput, match='Client-ID'):
        driver.message_controller.pop(queue, 1, project=project)
    assert stats(driver, queue, project)['claimed'] == 0


def test_the_client_comes_from_zaqars_request_context(sticky_queue, driver,
                                                      project):
    from zaqar import context
    queue = sticky_queue()
    post(driver, queue, project, msg('a', 1), msg('a', 2), msg('b', 1))
    context.RequestContext(client_id=ALICE)  # stores itself thread-locally
    claim_id, got = claim(driver, queue, project, limit=1)
    driver.message_controller.delete(queue, got[0]['id'], project=project,
                                     claim=claim_id)
    context.RequestContext(client_id=BOB)
    assert names(claim(driver, queue, project)[1]) == ['b1']
    context.RequestContext(client_id=ALICE)
    assert names(claim(driver, queue, project)[1]) == ['a2']
    context.RequestContext()


def test_a_group_stays_with_the_client_that_took_it(sticky_queue, driver,
                                                    project):
    queue = sticky_queue()
    post(driver, queue, project, msg('a', 1), msg('a', 2), msg('a', 3),
         msg('b', 1), msg('b', 2))
    claim_id, got = claim_as(ALICE, driver, queue, project, limit=1)
    assert names(got) == ['a1']
    delete_as(ALICE, driver, queue, project, got, claim_id)
    claim_id, got = claim_as(BOB, driver, queue, project)
    assert names(got) == ['b1']
    delete_as(BOB, driver, queue, project, got, claim_id)
    assert names(claim_as(BOB, driver, queue, project)[1]) == ['b2']
    assert names(claim_as(ALICE, driver, queue, project)[1]) == ['a2']


def test_a_released_or_expired_head_goes_back_to_its_client(
        sticky_queue, driver, project, clock):
    queue = sticky_queue()
    post(driver, queue, project, msg('a', 1))
    claim_id, _ = claim_as(ALICE, driver, queue, project, ttl=30)
    driver.claim_controller.delete(queue, claim_id, project=project)
    assert claim_as(BOB, driver, queue, project) == (None, [])
    claim_as(ALICE, driver, queue, project, ttl=30)
    clock.advance(30)
    assert claim_as(BOB, driver, queue, project) == (None, [])
    assert names(claim_as(ALICE, driver, queue, project)[1]) == ['a1']


def test_an_idle_clients_groups_go_to_the_next_client(sticky_queue, driver,
                                                      project, clock):
    queue = sticky_queue()
    post(driver, queue, project, msg('a', 1), msg('a', 2))
    claim_id, got = claim_as(ALICE, driver, queue, project, ttl=30)
    delete_as(ALICE, driver, queue, project, got, claim_id)
    clock.advance(STICKY_S - 1)
    assert claim_as(BOB, driver, queue, project) == (None, [])
    clock.advance(1)
    claim_id, got = claim_as(BOB, driver, queue, project)
    assert names(got) == ['a2']
    post(driver, queue, project, msg('a', 3))
    delete_as(BOB, driver, queue, project, got, claim_id)
    assert claim_as(ALICE, driver, queue, project) == (None, [])
    assert names(claim_as(BOB, driver, queue, project)[1]) == ['a3']


def test_renewing_and_deleting_keep_a_client_active(sticky_queue, driver,
                                                    project, clock):
    queue = sticky_queue()
    post(driver, queue, project, msg('a', 1), msg('b', 1), msg('a', 2),
         msg('b', 2))
    claim_id, got = claim_as(ALICE, driver, queue, project, ttl=600)
    assert names(got) == ['a1', 'b1']
    clock.advance(STICKY_S - 1)
    with sticky.acting_as(ALICE):
        driver.claim_controller.update(queue, claim_id, {'ttl': 600},
                                       project=project)
    clock.advance(STICKY_S - 1)
    delete_as(ALICE, driver, queue, project, got[:1], claim_id)
    clock.advance(STICKY_S - 1)
    with sticky.acting_as(ALICE):
        driver.message_controller.bulk_delete(queue, [got[1]['id']],
                                              project=project,
                                              claim_ids=[claim_id])
    clock.advance(STICKY_S - 1)
    assert claim_as(BOB, driver, queue, project) == (None, [])
    assert names(claim_as(ALICE, driver, queue, project)[1]) == ['a2', 'b2']


def test_a_pop_pins_the_group_too(sticky_queue, driver, project):
    queue = sticky_queue()
    post(driver, queue, project, msg('a', 1), msg('a', 2), msg('a', 3),
         msg('b', 1))
    with sticky.acting_as(ALICE):
        assert names(driver.message_controller.pop(
            queue, 10, project=project)) == ['a1', 'b1']
    assert claim_as(BOB, driver, queue, project) == (None, [])
    with sticky.acting_as(ALICE):
        assert names(driver.message_controller.pop(
            queue, 10, project=project)) == ['a2']


def test_a_delayed_head_of_a_pinned_group_goes_to_its_client(
        sticky_queue, driver, project, clock):
    queue = sticky_queue(_default_message_delay=30)
    post(driver, queue, project, msg('a', 1), delay=0)
    claim_id, got = claim_as(ALICE, driver, queue, project)
    post(driver, queue, project, msg('a', 2))
    delete_as(ALICE, driver, queue, project, got, claim_id)
    clock.advance(30)
    assert claim_as(BOB, driver, queue, project) == (None, [])
    assert names(claim_as(ALICE, driver, queue, project)[1]) == ['a2']


def test_a_dead_lettered_head_unpins_nothing(sticky_queue, make_queue,
                                             driver, project, clock):
    dlq = make_queue()
    queue = sticky_queue(_max_claim_count=1, _dead_letter_queue=dlq)
    post(driver, queue, project, msg('a', 1), msg('a', 2))
    claim_as(ALICE, driver, queue, project, ttl=30)
    clock.advance(30)
    assert claim_as(BOB, driver, queue, project) == (None, [])
    assert names(claim_as(ALICE, driver, queue, project)[1]) == ['a2']
    assert names(listed(driver, dlq, project)) == ['a1']


def test_a_dead_letter_is_free_in_a_sticky_dead_letter_queue(
        sticky_queue, driver, project, clock):
    dlq = sticky_queue()
    queue = sticky_queue(_max_claim_count=1, _dead_letter_queue=dlq)
    post(driver, queue, project, msg('a', 1))
    claim_as(ALICE, driver, queue, project, ttl=30)
    clock.advance(30)
    assert claim_as(ALICE, driver, queue, project) == (None, [])
    # Its pin stayed with its group in the queue it left.
    assert names(claim_as(BOB, driver, dlq, project)[1]) == ['a1']


def test_a_moved_group_is_free_in_a_sticky_target(sticky_queue, driver,
                                                  project):
    queue, target = sticky_queue(), sticky_queue()
    post(driver, queue, project, msg('a', 1), msg('a', 2))
    claim_id, got = claim_as(ALICE, driver, queue, project)
    delete_as(ALICE, driver, queue, project, got, claim_id)
    driver.message_controller.move_group(queue, 'a', target,
                                         project=project)
    assert names(claim_as(BOB, driver, target, project)[1]) == ['a2']


def test_stats_groups_listing_and_unpin(sticky_queue, driver, project):
    queue = sticky_queue()
    post(driver, queue, project, msg('a', 1), msg('a', 2), msg('b', 1))
    claim_id, got = claim_as(ALICE, driver, queue, project, limit=1)
    delete_as(ALICE, driver, queue, project, got, claim_id)
    assert stats(driver, queue, project)['groups_pinned'] == 1
    groups = list(next(driver.message_controller.list_groups(
        queue, project=project)))
    assert [(g['id'], g['client']) for g in groups] == [('a', ALICE),
                                                        ('b', None)]
    assert driver.message_controller.unpin_group(
        queue, 'a', project=project) == ALICE
    assert 'groups_pinned' not in stats(driver, queue, project)
    assert names(claim_as(BOB, driver, queue, project)[1]) == ['a2', 'b1']
    assert driver.message_controller.unpin_group(
        queue, 'zzz', project=project) is None


def test_turning_sticky_off_frees_every_group(sticky_queue, driver, project):
    queue = sticky_queue()
    post(driver, queue, project, msg('a', 1), msg('a', 2))
    claim_id, got = claim_as(ALICE, driver, queue, project)
    delete_as(ALICE, driver, queue, project, got, claim_id)
    driver.queue_controller.set_metadata(
        queue, {'_message_group_key': 'g'}, project=project)
    assert names(claim(driver, queue, project)[1]) == ['a2']


def test_purging_the_queue_forgets_its_pins(sticky_queue, driver, project):
    stage = stages.QueueStage(driver, driver.control_driver)
    queue = sticky_queue()
    post(driver, queue, project, msg('a', 1), msg('a', 2))
    claim_id, got = claim_as(ALICE, driver, queue, project)
    delete_as(ALICE, driver, queue, project, got, claim_id)
    stage.delete(queue, project)
    driver.queue_controller.create(queue, metadata=STICKY, project=project)
    post(driver, queue, project, msg('a', 3))
    assert names(claim_as(BOB, driver, queue, project)[1]) == ['a3']


def test_zaqars_purge_pops_every_group_and_pins_none(sticky_queue, driver,
                                                     project):
    """Zaqar's queue purge pops 100 at a time (more than a client may),
    as whichever client asked: it must empty the queue, groups pinned to
    other clients included, and leave no group pinned to itself."""
    queue = sticky_queue()
    post(driver, queue, project, msg('a', 1), msg('a', 2), msg('b', 1),
         msg('b', 2), msg('c', 1))
    for client in (ALICE, BOB):
        claim_id, got = claim_as(client, driver, queue, project, limit=1)
        delete_as(client, driver, queue, project, got, claim_id)
    # As deployed: Zaqar's purge asks for more than a client may pop.
    driver.conf.set_override('max_messages_per_claim_or_pop', 20,
                             group='transport')
    purged = []
    with sticky.acting_as('purger'):
        while True:
            popped = driver.message_controller.pop(
                queue, rules.ZAQAR_PURGE_POP, project=project)
            if not popped:
                break
            purged.extend(popped)
    assert sorted(names(purged)) == ['a2', 'b2', 'c1']
    counts = stats(driver, queue, project)
    assert counts['total'] == 0 and 'groups_pinned' not in counts
    post(driver, queue, project, msg('a', 3), msg('c', 2))
    assert names(claim_as('carol', driver, queue, project)[1]) == ['a3', 'c2']


def test_groups_and_pins_of_one_project_never_reach_another(
        sticky_queue, driver, project):
    # SPEC §8: same queue name, same group ids, same client in two
    # projects. Claims, group listings, purges, moves and pins of one
    # leave the other's groups as they were.
    other = project + '}/{:x'
    queue = sticky_queue()
    driver.queue_controller.create(queue, metadata=STICKY, project=other)
    for tenant in (project, other):
        driver.queue_controller.create('target', project=tenant)
        post(driver, queue, tenant, msg('a', 1), msg('a', 2), msg('b', 1),
             msg('c', 1))
    messages = driver.message_controller

    def groups(tenant):
        return {g['id']: (g['depth'], g['in_flight'], g['client'])
                for g in next(messages.list_groups(queue, project=tenant))}

    untouched = groups(other)
    assert untouched == {'a': (2, False, None), 'b': (1, False, None),
                         'c': (1, False, None)}
    # ALICE's claim pins 'a' to her here; over there 'a' stays free.
    assert names(claim_as(ALICE, driver, queue, project, limit=1)[1]) == [
        'a1']
    assert messages.purge_group(queue, 'b', project=project) == 1
    assert messages.move_group(queue, 'c', 'target', project=project) == 1
    assert groups(project) == {'a': (2, True, ALICE)}
    assert groups(other) == untouched
    assert names(claim_as(BOB, driver, queue, other, limit=1)[1]) == ['a1']
    assert messages.unpin_group(queue, 'a', project=project) == ALICE
    assert groups(other)['a'] == (2, True, BOB)
    assert listed(driver, 'target', other) == []
    assert stats(driver, queue, other)['total'] == 4


def test_claims_that_find_nothing_keep_a_client_active(
        sticky_queue, driver, project, clock):
    """Alice empties group 'a' (its pin stays) and then only claims, each
    finding nothing, within the sticky time: she stays active, so Bob
    still gets nothing of 'a' long after her delete alone would have
    lapsed. Once she stops claiming, after the sticky time he gets it."""
    queue = sticky_queue()
    post(driver, queue, project, msg('a', 1))
    claim_id, got = claim_as(ALICE, driver, queue, project)
    delete_as(ALICE, driver, queue, project, got, claim_id)
    for _ in range(2):
        clock.advance(STICKY_S - 1)
        assert claim_as(ALICE, driver, queue, project) == (None, [])
    # Her delete alone kept her active only until STICKY_S.
    post(driver, queue, project, msg('a', 2), msg('b', 1))
    assert names(claim_as(BOB, driver, queue, project)[1]) == ['b1']
    clock.advance(STICKY_S - 1)
    assert claim_as(BOB, driver, queue, project) == (None, [])
    clock.advance(1)
    assert names(claim_as(BOB, driver, queue, project)[1]) == ['a2']


def test_persistent_consumers_read_every_message_and_pin_nothing(
        sticky_queue, driver, project):
    """Persistent consumers read, they do not claim: on a sticky queue
    one reads every message in posting order (a head pinned to Alice and
    the members its group blocks included), whether or not a client is
    known (no Client-ID in the context, or its own consume id), and its
    reads pin no group: Bob then claims every group Alice does not
    hold."""
    queue = sticky_queue()
    post(driver, queue, project, msg('a', 1), msg('a', 2), msg('b', 1),
         msg('a', 3), msg('b', 2), msg('c', 1))
    claim_id, got = claim_as(ALICE, driver, queue, project, limit=1)
    delete_as(ALICE, driver, queue, project, got, claim_id)

    def read_all(reader):
        got, marker = reader.page(limit=2)
        seen = list(got)
        while got:
            got, marker = reader.page(marker, limit=2)
            seen.extend(got)
        return ['%s%s' % (body['g'], body['n']) for body in seen]

    everything = ['a2', 'b1', 'a3', 'b2', 'c1']
    assert read_all(Reader(driver, queue, project)) == everything
    reader = Reader(driver, queue, project)
    with sticky.acting_as(str(reader.id)):
        assert read_all(reader) == everything
    assert stats(driver, queue, project)['groups_pinned'] == 1
    assert names(claim_as(BOB, driver, queue, project)[1]) == ['b1', 'c1']


def test_a_group_with_no_message_left_stays_pinned_in_stats(
        sticky_queue, driver, project, clock):
    """Alice claims and deletes the only message of group 'a': while she
    stays active, stats still count 'a' in groups_pinned (the pin
    outlives its group), and a message posted to it later is hers."""
    queue = sticky_queue()
    post(driver, queue, project, msg('a', 1))
    claim_id, got = claim_as(ALICE, driver, queue, project)
    delete_as(ALICE, driver, queue, project, got, claim_id)
    counts = stats(driver, queue, project)
    assert counts['total'] == 0 and counts['groups_pinned'] == 1
    clock.advance(STICKY_S - 1)
    assert stats(driver, queue, project)['groups_pinned'] == 1
    post(driver, queue, project, msg('a', 2))
    assert claim_as(BOB, driver, queue, project) == (None, [])
    assert names(claim_as(ALICE, driver, queue, project)[1]) == ['a2']


def test_one_purge_takes_a_pinned_groups_every_message(sticky_queue, driver,
                                                      project):
    """Swift: the purge's first pop took the pinned head and left its
    pinned filing (the pin went first); the second pop met that stale
    filing first, and dropped the group's next message, listed after it
    in the same page, as a member of a group already attempted: the pop
    came back empty and Zaqar's purge stopped with a message left."""
    queue = sticky_queue()
    post(driver, queue, project, msg('a', 0), msg('a', 1), msg('a', 2))
    claim_id, got = claim_as(ALICE, driver, queue, project, limit=1)
    delete_as(ALICE, driver, queue, project, got, claim_id)
    with sticky.acting_as('purger'):
        purged = zaqar_purge(driver, queue, project)
    assert sorted(names(purged)) == ['a1', 'a2']
    assert stats(driver, queue, project)['total'] == 0


def test_zaqars_websocket_purge_is_known_by_its_caller(sticky_queue, driver,
                                                      project):
    """Zaqar's websocket API purges with its own ``queue_purge``, pops of
    100 until one is empty. With the bound raised to 100 those pops are
    ones a client may make, so only the caller tells: the purge takes the
    groups pinned to other active clients too, and the queue is empty."""
    queue = sticky_queue()
    post(driver, queue, project, msg('a', 1), msg('a', 2), msg('b', 1))
    claim_id, got = claim_as(ALICE, driver, queue, project, limit=1)
    delete_as(ALICE, driver, queue, project, got, claim_id)
    driver.conf.set_override('max_messages_per_claim_or_pop',
                             rules.ZAQAR_PURGE_POP, group='transport')
    api = endpoints.Endpoints(driver, driver.control_driver, None, None)
    purge = api_request.Request(
        'queue_purge', body={'queue_name': queue,
                             'resource_types': ['messages']},
        headers={'X-Project-ID': project})
    # No client is known: the purge pops with none.
    answer = api.queue_purge(purge).get_response()
    assert answer['headers']['status'] == 204, answer
    assert stats(driver, queue, project)['total'] == 0


@pytest.mark.parametrize('bound', [rules.ZAQAR_PURGE_POP, 1000])
def test_zaqars_purge_within_the_client_bound_is_an_ordinary_pop(
        sticky_queue, driver, project, bound):
    """With [transport] max_messages_per_claim_or_pop at 100 or more, a
    pop of 100 is one a client may make: called other than by Zaqar's
    purge (here, through the storage API), it pops as its client, takes
    only free groups (pinning them to itself) and leaves the groups
    pinned to other active clients to them. Zaqar's purge itself is known
    by its caller (tests/integration/test_sticky_purge.py)."""
    queue = sticky_queue()
    post(driver, queue, project, msg('a', 1), msg('a', 2), msg('b', 1),
         msg('b', 2), msg('c', 1), msg('c', 2))
    for client in (ALICE, BOB):
        claim_id, got = claim_as(client, driver, queue, project, limit=1)
        delete_as(client, driver, queue, project, got, claim_id)
    driver.conf.set_override('max_messages_per_claim_or_pop', bound,
                             group='transport')
    with sticky.acting_as('purger'):
        assert names(driver.message_controller.pop(
            queue, rules.ZAQAR_PURGE_POP, project=project)) == ['c1']
    counts = stats(driver, queue, project)
    assert counts['total'] == 3 and counts['groups_pinned'] == 3
    assert claim_as('carol', driver, queue, project) == (None, [])
    assert names(claim_as(ALICE, driver, queue, project)[1]) == ['a2']
    assert names(claim_as(BOB, driver, queue, project)[1]) == ['b2']
    with sticky.acting_as('purger'):
        assert names(driver.message_controller.pop(
            queue, rules.ZAQAR_PURGE_POP, project=project)) == ['c2']
