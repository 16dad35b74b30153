"""Swift: gc removes message objects no position names (strays.py).

``m/`` has no X-Delete-At, so what Swift used to remove at a message's
expiry is gc's: a post that gave up ids and could not delete what it
wrote under them, a removal cut short after the position went, and a
message whose position a rival took after its read-back, once expired.
Removing such a message, gc or a reader leaves the rival's position.
"""

import json
import uuid

from tests.contract.helpers import bodies, claim, listed, post, stats
from tests.swift.test_conditional import taking_a_position_first
from zaqar_delay.drivers.swift import names
from zaqar_delay.drivers.swift import posts
from zaqar_delay.drivers.swift import state
from zaqar_delay.drivers.swift import summary


def objects(driver, qs, prefix):
    return [e['name'] for e in driver.store.listing_all(qs.c, prefix)]


def deep_pass(driver, qs):
    """gc's deep pass over the queue: without the summary an earlier one
    wrote, the pass does not stop at the light checks (summary.py)."""
    driver.store.delete(qs.c, names.GC_SUMMARY)
    driver._gc_queue(qs.c)


def test_a_post_that_could_not_delete_the_ids_it_gave_up_leaves_nothing(
        driver, make_queue, project, clock, monkeypatch):
    """The post lost a position, moved under new ids, and its delete of
    what it wrote under the old ones failed (or it died there): those
    ``m/`` have no position and no filing. gc leaves them while a post
    could still be at work (DRAFT_AGE_S), then removes them, SETTLE_BATCH
    a pass; the messages posted are untouched."""
    queue = make_queue()
    qs = driver.queue_state(queue, project)
    ids = post(driver, queue, project, 'warm-up', ttl=3600)
    taking_a_position_first(driver, monkeypatch, times=1)
    monkeypatch.setattr(posts._Writes, 'abandon', lambda self: None)
    ids += post(driver, queue, project, 'a', 'b', 'c', ttl=3600)
    monkeypatch.undo()
    kept = {names.message_obj(mid) for mid in ids}
    assert len(set(objects(driver, qs, 'm/')) - kept) == 3
    deep_pass(driver, qs)
    assert len(set(objects(driver, qs, 'm/')) - kept) == 3
    monkeypatch.setattr(state, 'SETTLE_BATCH', 2)
    clock.advance(61)
    deep_pass(driver, qs)
    assert len(set(objects(driver, qs, 'm/')) - kept) == 1
    clock.advance(1)
    deep_pass(driver, qs)
    assert set(objects(driver, qs, 'm/')) == kept
    assert bodies(listed(driver, queue, project)) == [
        'warm-up', 'a', 'b', 'c']
    assert stats(driver, queue, project)['total'] == 4


def cut_short(driver, qs, message_id, leave):
    """What a removal whose bulk delete failed object by object leaves:
    of the message's objects, its ``m/`` and those named in ``leave``."""
    found = driver.store.get_json(qs.c, names.message_obj(message_id))
    pos = found[1]['p']
    doomed = {names.position_obj(pos): 'p',
              names.avail_obj(pos, message_id, 1): 'a'}
    driver.store.delete_many(qs.c, [name for name, kind in doomed.items()
                                    if kind not in leave])


def test_a_removal_cut_short_after_the_position_leaves_no_message(
        driver, make_queue, project, clock):
    """Position gone, ``m/`` left: unfiled, it goes once old enough;
    still filed (its ``a/`` left too), it is handed out as the message it
    still is, and goes with its filing once expired."""
    queue = make_queue()
    qs = driver.queue_state(queue, project)
    unfiled, filed = post(driver, queue, project, 'unfiled', 'filed',
                          ttl=600)
    cut_short(driver, qs, unfiled, leave=())
    cut_short(driver, qs, filed, leave=('a',))
    clock.advance(61)
    deep_pass(driver, qs)
    assert objects(driver, qs, 'm/') == [names.message_obj(filed)]
    clock.advance(600)
    deep_pass(driver, qs)
    assert objects(driver, qs, 'm/') == []
    assert objects(driver, qs, 'a/') == []


def rival_takes_the_position_of(driver, qs, message_id, body, longer_ms):
    """A rival post's PUT of the message's position lands after the
    post read it back (docs/swift.md, *Claim exclusivity*): the position
    names the rival's message (in no group), stored and filed there as a
    post would, living ``longer_ms`` longer. Returns the rival's id."""
    record = driver.store.get_json(qs.c, names.message_obj(message_id))[1]
    rival = str(uuid.uuid4())
    record.update(b=body, e=record['e'] + longer_ms, g=None)
    driver.store.put(qs.c, names.message_obj(rival),
                     json.dumps(record).encode(),
                     content_type='application/json',
                     headers={state.META_E: record['e']})
    position = names.position_obj(record['p'])
    driver.store.put(qs.c, position, content_type=state.position_type(
        state.Message(rival, {}, record)))
    driver.store.put(qs.c, names.avail_obj(record['p'], rival, 1))
    return rival, position


def sharing_a_position(driver, make_queue, project, ttl, grouped=False):
    """A queue with our message (``ttl``; in group ``x`` if ``grouped``)
    and a rival's sharing its position, the rival living an hour longer:
    (queue, its QueueState, our id, the rival's, the position's object
    name)."""
    queue = make_queue({'_message_group_key': 'g'} if grouped else None)
    qs = driver.queue_state(queue, project)
    ours = post(driver, queue, project,
                {'g': 'x', 'n': 'ours'} if grouped else 'ours', ttl=ttl)[0]
    rival, position = rival_takes_the_position_of(driver, qs, ours,
                                                  'rival', 3600 * 1000)
    return queue, qs, ours, rival, position


def test_a_message_whose_position_a_rival_took_lives_until_it_expires(
        driver, make_queue, project, clock):
    """Its position names the rival, but it was acknowledged and filed:
    gc keeps it, and once it expired removes its objects, never the
    rival's position, and the rival is still handed out."""
    queue, qs, ours, rival, position = sharing_a_position(
        driver, make_queue, project, ttl=3600)
    clock.advance(61)
    deep_pass(driver, qs)
    assert names.message_obj(ours) in objects(driver, qs, 'm/')
    clock.advance(3600)
    deep_pass(driver, qs)
    assert objects(driver, qs, 'm/') == [names.message_obj(rival)]
    assert ours not in ''.join(objects(driver, qs, 'a/'))
    assert names.ct_params(driver.store.head(qs.c, position)[
        'content-type'])['id'] == rival
    assert bodies(claim(driver, queue, project)[1]) == ['rival']


def test_a_claimed_message_whose_position_a_rival_took_is_kept(
        driver, make_queue, project, clock):
    """Claimed, it has no filing, only its lock: still a message."""
    queue, qs, ours, _, _ = sharing_a_position(driver, make_queue, project,
                                               ttl=3600)
    claim_id, claimed = claim(driver, queue, project, ttl=600, grace=60)
    assert sorted(bodies(claimed)) == ['ours', 'rival']
    clock.advance(61)
    deep_pass(driver, qs)
    assert names.message_obj(ours) in objects(driver, qs, 'm/')
    driver.message_controller.delete(queue, ours, project=project,
                                     claim=claim_id)
    assert names.message_obj(ours) not in objects(driver, qs, 'm/')


def test_an_expired_message_whose_position_is_not_listed_yet_is_left(
        driver, make_queue, project, clock, monkeypatch):
    """A position the ``p/`` listing does not show yet (container
    updates lag) still names its message: asked for by name, it leaves
    the message to gc's expiry removal, which takes the position too and
    counts the message as lost for persistent consumers, rather than
    have it removed as a stray, without its position."""
    queue = make_queue()
    qs = driver.queue_state(queue, project)
    mid = post(driver, queue, project, 'expiring', ttl=60)[0]
    real = driver.store.listing_all

    def lagging(container, prefix='', *args, **kwargs):
        return [] if prefix == 'p/' else real(container, prefix, *args,
                                              **kwargs)

    clock.advance(120)
    monkeypatch.setattr(driver.store, 'listing_all', lagging)
    deep_pass(driver, qs)
    monkeypatch.undo()
    assert objects(driver, qs, 'm/') == [names.message_obj(mid)]
    clock.advance(1)
    deep_pass(driver, qs)
    assert objects(driver, qs, 'm/') == objects(driver, qs, 'p/') == []


def test_a_reader_removing_an_expired_message_leaves_a_rivals_position(
        driver, make_queue, project, clock):
    """A claim that meets the expired message's filing removes it, but
    not the position, which names the rival: the rival is still listed,
    counted and handed out."""
    queue, qs, ours, rival, position = sharing_a_position(
        driver, make_queue, project, ttl=60)
    clock.advance(120)
    assert bodies(claim(driver, queue, project)[1]) == ['rival']
    assert names.message_obj(ours) not in objects(driver, qs, 'm/')
    assert names.ct_params(driver.store.head(qs.c, position)[
        'content-type'])['id'] == rival
    assert bodies(listed(driver, queue, project,
                         include_claimed=True)) == ['rival']
    assert stats(driver, queue, project)['total'] == 1


def test_a_claim_finishing_a_removal_that_died_leaves_a_rivals_position(
        driver, make_queue, project):
    """Our grouped message's removal died after its ``m/`` went: the
    claim that wins its lock finds it missing and finishes the removal
    (its group moves on), but not of the position, which names the
    rival."""
    queue, qs, ours, rival, position = sharing_a_position(
        driver, make_queue, project, ttl=3600, grouped=True)
    driver.store.delete(qs.c, names.message_obj(ours))
    assert bodies(claim(driver, queue, project)[1]) == ['rival']
    assert objects(driver, qs, 'g/') == []
    assert names.ct_params(driver.store.head(qs.c, position)[
        'content-type'])['id'] == rival
    assert stats(driver, queue, project)['total'] == 1


def test_a_redelivery_finishing_a_removal_that_died_leaves_a_rivals_position(
        driver, make_queue, project, clock):
    """Our grouped message, claimed with the rival, lost its ``m/`` to a
    removal that died midway. When the claim ends, the redelivery delay
    outlasts what the claim kept it alive for, so redelivery reads it,
    finds it missing and finishes its removal (its group moves on), but
    not of the position, which names the rival (state.redeliver)."""
    queue = make_queue({'_message_group_key': 'g',
                        '_redelivery_delay': 600})
    qs = driver.queue_state(queue, project)
    ours = post(driver, queue, project, {'g': 'x', 'n': 'ours'},
                ttl=3600)[0]
    rival, position = rival_takes_the_position_of(driver, qs, ours,
                                                  'rival', 3600 * 1000)
    _, claimed = claim(driver, queue, project, ttl=60, grace=60)
    assert sorted(m['id'] for m in claimed) == sorted([ours, rival])
    driver.store.delete(qs.c, names.message_obj(ours))
    clock.advance(200)
    # This claim settles the ended one: both go back after 600 s.
    assert claim(driver, queue, project)[1] == []
    assert objects(driver, qs, 'g/') == []
    assert names.ct_params(driver.store.head(qs.c, position)[
        'content-type'])['id'] == rival
    assert stats(driver, queue, project)['total'] == 1
    clock.advance(600)
    assert bodies(claim(driver, queue, project)[1]) == ['rival']


def test_a_claim_dropping_a_head_filed_for_its_expiry_keeps_a_rivals_position(
        driver, make_queue, project, clock):
    """Our grouped message expires before it is due, so it is filed for
    its expiry (``x``), and its removal died after its ``m/`` went. The
    claim that meets that filing finds it missing and finishes the
    removal (its group moves on), but not of the position, which names
    the rival (claims._drop_expired)."""
    queue = make_queue({'_message_group_key': 'g',
                        '_default_message_delay': 120})
    qs = driver.queue_state(queue, project)
    ours = post(driver, queue, project, {'g': 'x', 'n': 'ours'},
                ttl=60)[0]
    [filing] = objects(driver, qs, 'd/')
    assert names.ct_params(driver.store.head(qs.c, filing)[
        'content-type']).get('x') == '1'
    rival, position = rival_takes_the_position_of(driver, qs, ours,
                                                  'rival', 3600 * 1000)
    driver.store.delete(qs.c, names.message_obj(ours))
    clock.advance(61)
    assert bodies(claim(driver, queue, project)[1]) == ['rival']
    assert objects(driver, qs, 'd/') == objects(driver, qs, 'g/') == []
    assert names.ct_params(driver.store.head(qs.c, position)[
        'content-type'])['id'] == rival
    assert stats(driver, queue, project)['total'] == 1


def test_strays_kept_for_now_do_not_hold_the_others_back(
        driver, make_queue, project, clock, monkeypatch):
    """More suspects than a pass takes, the first ones in name order
    still filed (kept until they expire): the unfiled one, last in name
    order, is still reached."""
    queue = make_queue()
    qs = driver.queue_state(queue, project)
    filed = post(driver, queue, project, 'one', 'two', ttl=3600)
    for mid in filed:
        cut_short(driver, qs, mid, leave=('a',))
    record = driver.store.get_json(qs.c, names.message_obj(filed[0]))[1]
    last = 'z' * 8
    driver.store.put(qs.c, names.message_obj(last),
                     json.dumps(dict(record, p=record['p'] + 99)).encode(),
                     content_type='application/json',
                     headers={state.META_E: record['e']})
    monkeypatch.setattr(state, 'SETTLE_BATCH', 2)
    clock.advance(61)
    for _ in range(40):
        deep_pass(driver, qs)
        if names.message_obj(last) not in objects(driver, qs, 'm/'):
            break
    assert sorted(objects(driver, qs, 'm/')) == sorted(
        names.message_obj(mid) for mid in filed)


def test_a_queue_is_swept_at_most_every_ten_minutes(
        driver, make_queue, project, clock):
    """Listing ``m/`` costs a deep pass a quarter more: a deep pass that
    comes sooner (here, for a message posted since that could be a
    draft) leaves strays to the next one after SWEEP_EVERY_S."""
    from zaqar_delay.drivers.swift import strays
    queue = make_queue()
    qs = driver.queue_state(queue, project)
    kept = post(driver, queue, project, 'kept', ttl=3600)
    cut_short(driver, qs, post(driver, queue, project, 'first',
                               ttl=3600)[0], leave=())
    clock.advance(61)
    deep_pass(driver, qs)
    second = post(driver, queue, project, 'second', ttl=3600)[0]
    cut_short(driver, qs, second, leave=())
    post(driver, queue, project, 'later', ttl=3600)
    clock.advance(61)
    before = summary.read(qs)
    driver._gc_queue(qs.c)
    # A deep pass (it wrote the summary again), which did not sweep.
    assert summary.read(qs)['next'] != before['next']
    assert names.message_obj(second) in objects(driver, qs, 'm/')
    # The next deep pass: at rest, the backstop's.
    clock.advance(strays.SWEEP_EVERY_S)
    driver._gc_queue(qs.c)
    assert names.message_obj(second) not in objects(driver, qs, 'm/')
    assert names.message_obj(kept[0]) in objects(driver, qs, 'm/')


def test_a_last_sweep_in_the_future_does_not_hold_sweeps_back(
        driver, make_queue, project, clock):
    """A gc host whose clock ran a day ahead wrote when it swept: taken
    for that, it would keep every other host from sweeping for a day."""
    queue = make_queue()
    qs = driver.queue_state(queue, project)
    stray = post(driver, queue, project, 'stray', ttl=3600)[0]
    cut_short(driver, qs, stray, leave=())
    clock.advance(61)
    driver.store.put(qs.c, names.GC_SUMMARY,
                     content_type=names.content_type(
                         p=-1, next=0, sw=clock() + 86400 * 1000))
    driver._gc_queue(qs.c)
    assert objects(driver, qs, 'm/') == []
