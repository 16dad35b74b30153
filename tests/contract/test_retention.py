"""SPEC §5 (issue 10): retention by time and length, on every backend.

The operator's settings come from a configuration file read before the
driver is built (the ``operator_config`` fixture of tests/conftest.py).
The rules, exactly (zaqar_delay/retention.py):

* kept by time: ``time`` 0 or ``created + time > now``;
* kept by length: ``length`` 0 or among the newest ``length`` live
  messages that are not under a live claim (delayed ones count);
* a message under a live claim is kept until the claim ends;
* a message that is no longer kept never comes back, even when the newer
  messages that pushed it beyond ``length`` leave (claimed, deleted,
  expired);
* no read returns what is not kept; ``clean`` and claims remove it, and
  the queue's ``removed`` statistic counts every removal once.
"""

import time
import types
import uuid

import pytest
from zaqar.storage import errors as storage_errors

from localstack import backends
from tests.contract.helpers import bodies, claim, listed, post, stats
from tests.contract.test_queue_stage import through_pipeline
from zaqar_delay import driver as zaqar_delay_driver
from zaqar_delay import errors
from zaqar_delay import retention

GROUPED = {'_message_group_key': 'g'}


def operator(**settings):
    """Run the test with an operator [retention] of ``settings``."""
    text = '[retention]\n' + ''.join(
        '{} = {}\n'.format(name, value) for name, value in settings.items())
    return pytest.mark.parametrize(
        'operator_config', [text],
        ids=[','.join('{}={}'.format(*item) for item in settings.items())])


def post_each(driver, queue, project, *names, **extra):
    """Post each of ``names`` on its own; {name: id} in posting order."""
    return {name: post(driver, queue, project, name, **extra)[0]
            for name in names}


def take(driver, queue, project, how):
    """Bodies a claim or a pop of up to 100 hands out, or ('pop one')
    pops of one each until one finds nothing."""
    if how == 'claim':
        return bodies(claim(driver, queue, project, limit=100)[1])
    if how == 'pop one':
        taken = []
        for _ in range(100):
            popped = driver.message_controller.pop(queue, 1,
                                                   project=project)
            if not popped:
                break
            taken += bodies(popped)
        return taken
    return bodies(driver.message_controller.pop(queue, 100,
                                                project=project))


def clean_all(driver, queue, project, batch):
    """Call clean until it says there is no more; the counts it returned."""
    counts = []
    for _ in range(100):
        removed, more = driver.message_controller.clean(queue, project,
                                                        batch)
        assert 0 <= removed <= batch
        counts.append(removed)
        if not more:
            return counts
    raise AssertionError('clean never finished')


def removed(driver, queue, project):
    return driver.message_controller.stats(queue, project)[
        'retention']['removed']


def assert_reads(driver, queue, project, posted, kept):
    """Every read that changes nothing shows exactly ``kept`` (names,
    oldest first) of the ``posted`` {name: id} messages, which are neither
    claimed nor delayed."""
    messages = driver.message_controller
    assert bodies(listed(driver, queue, project)) == kept
    assert bodies(listed(driver, queue, project, include_claimed=True,
                         include_delayed=True)) == kept
    assert bodies(messages.bulk_get(queue, list(posted.values()),
                                    project=project)) == kept
    for name, message_id in posted.items():
        if name in kept:
            assert messages.get(queue, message_id,
                                project=project)['body'] == name
        else:
            with pytest.raises(storage_errors.MessageDoesNotExist):
                messages.get(queue, message_id, project=project)
    counts = stats(driver, queue, project)
    assert (counts['total'], counts['claimed'], counts['free'],
            counts['delayed']) == (len(kept), 0, len(kept), 0)
    if kept:
        assert messages.first(queue, project, 1)['body'] == kept[0]
        assert messages.first(queue, project, -1)['body'] == kept[-1]
        assert counts['oldest']['id'] == posted[kept[0]]
        assert counts['newest']['id'] == posted[kept[-1]]
    else:
        with pytest.raises(storage_errors.QueueIsEmpty):
            messages.first(queue, project)
        assert 'oldest' not in counts


# -- time and length, at their boundaries -----------------------------------

@operator(time=60)
@pytest.mark.parametrize('how', ['claim', 'pop', 'pop one'])
def test_a_message_exactly_time_old_is_gone_one_ms_younger_is_kept(
        driver, make_queue, project, clock, how):
    queue = make_queue()
    posted = post_each(driver, queue, project, 'old')
    clock.advance(10)
    posted.update(post_each(driver, queue, project, 'new'))
    clock.advance(49.999)
    assert_reads(driver, queue, project, posted, ['old', 'new'])
    clock.advance(0.001)
    assert_reads(driver, queue, project, posted, ['new'])
    assert take(driver, queue, project, how) == ['new']


@operator(length=3)
@pytest.mark.parametrize('how', ['claim', 'pop', 'pop one'])
def test_a_queue_at_exactly_length_keeps_all_one_over_drops_the_oldest(
        driver, make_queue, project, how):
    queue = make_queue()
    posted = post_each(driver, queue, project, 'm0', 'm1', 'm2')
    assert_reads(driver, queue, project, posted, ['m0', 'm1', 'm2'])
    posted.update(post_each(driver, queue, project, 'm3'))
    assert_reads(driver, queue, project, posted, ['m1', 'm2', 'm3'])
    # Several in one post: the oldest still go first.
    posted.update(zip(['m4', 'm5'],
                      post(driver, queue, project, 'm4', 'm5')))
    assert_reads(driver, queue, project, posted, ['m3', 'm4', 'm5'])
    assert take(driver, queue, project, how) == ['m3', 'm4', 'm5']


@operator(length=2)
def test_in_flight_messages_over_length_are_kept_until_their_claim_ends(
        driver, make_queue, project):
    queue = make_queue()
    messages = driver.message_controller
    posted = post_each(driver, queue, project, 'a', 'b')
    claim_id, got = claim(driver, queue, project, limit=1)
    assert bodies(got) == ['a']
    posted.update(post_each(driver, queue, project, 'c', 'd'))
    # Not in flight: b, c, d, of which the newest two are kept.
    assert bodies(listed(driver, queue, project)) == ['c', 'd']
    assert bodies(listed(driver, queue, project,
                         include_claimed=True)) == ['a', 'c', 'd']
    assert messages.get(queue, posted['a'], project=project)['body'] == 'a'
    with pytest.raises(storage_errors.MessageDoesNotExist):
        messages.get(queue, posted['b'], project=project)
    assert bodies(driver.claim_controller.get(queue, claim_id,
                                              project=project)[1]) == ['a']
    assert messages.first(queue, project, 1)['body'] == 'a'
    counts = stats(driver, queue, project)
    assert (counts['total'], counts['claimed'], counts['free']) == (3, 1, 2)
    assert counts['oldest']['id'] == posted['a']
    # Released, a is judged like the others: the oldest of three.
    driver.claim_controller.delete(queue, claim_id, project=project)
    assert_reads(driver, queue, project, posted, ['c', 'd'])
    assert take(driver, queue, project, 'claim') == ['c', 'd']


@operator(time=60)
def test_an_old_message_stays_while_claimed_and_goes_when_the_claim_ends(
        driver, make_queue, project, clock):
    queue = make_queue()
    messages = driver.message_controller
    posted = post_each(driver, queue, project, 'old', 'acked')
    claim_id, _ = claim(driver, queue, project, ttl=100, grace=0)
    clock.advance(90)
    posted.update(post_each(driver, queue, project, 'fresh'))
    assert bodies(listed(driver, queue, project, include_claimed=True)) == [
        'old', 'acked', 'fresh']
    assert messages.get(queue, posted['old'], project=project)['body'] \
        == 'old'
    assert stats(driver, queue, project)['claimed'] == 2
    # A consumer acknowledges a claimed message past its age as usual.
    messages.delete(queue, posted['acked'], project=project, claim=claim_id)
    clock.advance(10)
    assert_reads(driver, queue, project, posted, ['fresh'])
    assert take(driver, queue, project, 'claim') == ['fresh']
    assert removed(driver, queue, project) <= 1
    clean_all(driver, queue, project, 10)
    # The acknowledged message was deleted, not removed by retention.
    assert removed(driver, queue, project) == 1


@operator(length=2)
def test_delayed_messages_count_towards_length(driver, make_queue, project,
                                               clock):
    queue = make_queue({'_default_message_delay': 30})
    post(driver, queue, project, 'due', delay=0)
    post(driver, queue, project, 'later-1')
    post(driver, queue, project, 'later-2')
    messages = driver.message_controller
    assert claim(driver, queue, project) == (None, [])
    assert messages.pop(queue, 10, project=project) == []
    assert listed(driver, queue, project) == []
    assert bodies(listed(driver, queue, project, include_delayed=True)) == [
        'later-1', 'later-2']
    with pytest.raises(storage_errors.QueueIsEmpty):
        messages.first(queue, project)
    counts = stats(driver, queue, project)
    assert (counts['total'], counts['delayed'], counts['free']) == (2, 2, 0)
    clock.advance(30)
    assert take(driver, queue, project, 'claim') == ['later-1', 'later-2']


@operator(length=2)
@pytest.mark.parametrize('newer_leaves', ['claimed', 'deleted', 'expired'])
def test_a_message_beyond_length_stays_gone_when_newer_ones_leave(
        driver, make_queue, project, clock, newer_leaves):
    """Gone means gone: once a message is beyond ``length`` it does not
    come back when the newer messages that pushed it out are claimed,
    deleted or expire (whether or not it was physically removed yet)."""
    queue = make_queue({'_default_message_delay': 30})
    messages = driver.message_controller
    posted = post_each(driver, queue, project, 'old')        # delayed
    posted.update(post_each(driver, queue, project, 'b', delay=0, ttl=60))
    posted.update(post_each(driver, queue, project, 'c', delay=0))
    assert bodies(listed(driver, queue, project,
                         include_delayed=True)) == ['b', 'c']
    if newer_leaves == 'claimed':
        assert take(driver, queue, project, 'claim') == ['b', 'c']
    elif newer_leaves == 'deleted':
        messages.delete(queue, posted['c'], project=project)
    clock.advance(60)   # 'old' is due; 'b' has expired
    assert 'old' not in bodies(listed(driver, queue, project,
                                      include_claimed=True,
                                      include_delayed=True))
    with pytest.raises(storage_errors.MessageDoesNotExist):
        messages.get(queue, posted['old'], project=project)
    assert 'old' not in take(driver, queue, project, 'claim')


# -- groups ----------------------------------------------------------------

def names(messages):
    return [m['body']['g'] + str(m['body']['n']) for m in messages]


def msg(group, n):
    return {'g': group, 'n': n}


@operator(time=60)
def test_a_delayed_group_head_dropped_by_age_hands_on_to_the_next_member(
        driver, make_queue, project, clock):
    queue = make_queue(dict(GROUPED, _default_message_delay=1))
    post(driver, queue, project, msg('a', 1), delay=100)
    clock.advance(30)
    post(driver, queue, project, msg('a', 2), msg('a', 3), msg('b', 1),
         delay=0)
    # a1 is not due yet: it blocks its group.
    assert names(claim(driver, queue, project)[1]) == ['b1']
    clock.advance(30)
    # a1 is 60 s old: gone, and a2 is the head, a3 still behind it.
    claim_id, got = claim(driver, queue, project)
    assert names(got) == ['a2']
    driver.message_controller.delete(queue, got[0]['id'], project=project,
                                     claim=claim_id)
    assert names(claim(driver, queue, project)[1]) == ['a3']


@operator(length=3)
def test_a_group_head_dropped_by_length_keeps_the_group_in_order(
        driver, make_queue, project):
    queue = make_queue(GROUPED)
    post(driver, queue, project, msg('a', 1), msg('a', 2), msg('b', 1),
         msg('a', 3))
    assert names(listed(driver, queue, project)) == ['a2', 'b1', 'a3']
    claim_id, got = claim(driver, queue, project)
    assert names(got) == ['a2', 'b1']
    driver.message_controller.delete(queue, got[0]['id'], project=project,
                                     claim=claim_id)
    assert names(claim(driver, queue, project)[1]) == ['a3']


@operator(length=3)
@pytest.mark.parametrize('how', ['claim', 'pop'])
def test_a_take_of_one_reaches_a_head_behind_a_long_dropped_run(
        driver, make_queue, project, how):
    # 10 ungrouped messages, then 30 members of one group: all but the
    # last 3 beyond length. A consumer taking one at a time gets a28 at
    # once, not one empty answer per dropped message (a consumer reads an
    # empty answer as an empty queue).
    queue = make_queue(GROUPED)
    post(driver, queue, project, *[{'n': n} for n in range(10)])
    for first in range(1, 31, 10):
        post(driver, queue, project,
             *[msg('a', n) for n in range(first, first + 10)])
    for expected in ('a28', 'a29', 'a30'):
        if how == 'pop':
            got = driver.message_controller.pop(queue, 1, project=project)
        else:
            claim_id, got = claim(driver, queue, project, limit=1)
        assert names(got) == [expected]
        if how == 'claim':
            driver.message_controller.delete(
                queue, got[0]['id'], project=project, claim=claim_id)
    assert claim(driver, queue, project, limit=1)[1] == []
    # The dropped ones are removed, and counted, once each.
    clean_all(driver, queue, project, 10)
    assert removed(driver, queue, project) == 37
    assert stats(driver, queue, project)['total'] == 0


# -- policy and where the settings come from --------------------------------

@operator(policy='disabled', time=60, length=1)
def test_policy_disabled_removes_nothing_but_ttl_holds(driver, make_queue,
                                                       project, clock):
    queue = make_queue()
    posted = post_each(driver, queue, project, 'a', 'b', 'c', ttl=100)
    clock.advance(70)
    assert_reads(driver, queue, project, posted, ['a', 'b', 'c'])
    assert driver.message_controller.clean(queue, project, 10) == (0, False)
    assert driver.message_controller.stats(queue, project)['retention'] == {
        'policy': 'disabled', 'time': 60, 'length': 1,
        'consumers_required': None, 'removed': 0}
    clock.advance(30)
    assert_reads(driver, queue, project, posted, [])


def test_the_default_keeps_everything_and_stats_say_so(driver, make_queue,
                                                       project, clock):
    queue = make_queue()
    posted = post_each(driver, queue, project, *range(5), ttl=1000)
    clock.advance(999)
    assert_reads(driver, queue, project, posted, list(range(5)))
    assert driver.message_controller.clean(queue, project, 2) == (0, False)
    assert driver.message_controller.stats(queue, project)['retention'] == {
        'policy': 'cleanup', 'time': 0, 'length': 0,
        'consumers_required': None, 'removed': 0}


OVERRIDES = """
[retention]
time = 100
length = 0

[retention:special]
time = 50
length = 5

[retention:{project}/special]
length = 2
"""


@pytest.mark.parametrize('operator_config', [OVERRIDES], ids=['overrides'])
def test_the_most_specific_override_section_wins(driver, make_queue,
                                                 project, clock):
    other_project = project + '-other'
    special = make_queue(name='special')
    plain = make_queue(name='plain')
    driver.queue_controller.create('special', project=other_project)
    messages = driver.message_controller

    def effective(queue, in_project):
        report = messages.stats(queue, in_project)['retention']
        return report['policy'], report['time'], report['length']

    assert effective(special, project) == ('cleanup', 50, 2)
    assert effective('special', other_project) == ('cleanup', 50, 5)
    assert effective(plain, project) == ('cleanup', 100, 0)
    for queue, in_project in ((special, project), (plain, project),
                              ('special', other_project)):
        post(driver, queue, in_project, *range(6))
    assert bodies(listed(driver, special, project)) == [4, 5]
    assert bodies(listed(driver, 'special', other_project)) == [1, 2, 3, 4,
                                                                5]
    assert bodies(listed(driver, plain, project)) == list(range(6))
    clock.advance(50)
    assert listed(driver, special, project) == []
    assert listed(driver, 'special', other_project) == []
    assert bodies(listed(driver, plain, project)) == list(range(6))
    clock.advance(50)
    assert listed(driver, plain, project) == []


POLICY_OVERRIDES = """
[retention]
time = 100
consumers_required = 1

[retention:quiet]
policy = disabled
consumers_required = 0
"""


@pytest.mark.parametrize('operator_config', [POLICY_OVERRIDES],
                         ids=['policy-overrides'])
def test_policy_and_consumers_required_are_overridden_per_queue(
        driver, make_queue, project, clock):
    quiet, plain = make_queue(name='quiet'), make_queue(name='plain')
    messages = driver.message_controller

    def effective(queue):
        report = messages.stats(queue, project)['retention']
        return report['policy'], report['time'], report['consumers_required']

    assert effective(quiet) == ('disabled', 100, 0)
    assert effective(plain) == ('cleanup', 100, 1)
    post(driver, quiet, project, *range(3))
    post(driver, plain, project, *range(3))
    clock.advance(100)
    # Disabled, retention removes nothing: reads show them, clean keeps.
    assert clean_all(driver, quiet, project, 10) == [0]
    clean_all(driver, plain, project, 10)
    assert bodies(listed(driver, quiet, project)) == [0, 1, 2]
    assert listed(driver, plain, project) == []
    assert (removed(driver, quiet, project),
            removed(driver, plain, project)) == (0, 3)


# -- the tenant's _retention ------------------------------------------------

@operator(time=100, length=10)
@pytest.mark.parametrize('value, effective', [
    ({'time': 50}, ('cleanup', 50, 10)),
    ({'length': 3}, ('cleanup', 100, 3)),
    ({'time': 100, 'length': 10}, ('cleanup', 100, 10)),
    ({'policy': 'cleanup', 'time': 1, 'length': 1}, ('cleanup', 1, 1)),
    ({}, ('cleanup', 100, 10)),
])
def test_a_retention_that_tightens_or_equals_the_operators_is_taken(
        driver, project, value, effective):
    queues = through_pipeline(driver)
    messages = driver.message_controller
    queues.create('q', metadata={'_retention': value}, project=project)
    report = messages.stats('q', project)['retention']
    assert (report['policy'], report['time'], report['length']) == effective
    queues.create('r', project=project)
    queues.set_metadata('r', {'_retention': value}, project=project)
    assert queues.get_metadata('r', project=project) == {'_retention': value}
    report = messages.stats('r', project)['retention']
    assert (report['policy'], report['time'], report['length']) == effective


@operator(time=100, length=10)
def test_a_tightened_retention_applies(driver, make_queue, project, clock):
    queue = make_queue({'_retention': {'time': 30, 'length': 2}})
    posted = post_each(driver, queue, project, 'a', 'b', 'c')
    assert_reads(driver, queue, project, posted, ['b', 'c'])
    clock.advance(30)
    assert_reads(driver, queue, project, posted, [])


def test_a_tenant_may_set_retention_where_the_operator_sets_none(
        driver, make_queue, project, clock):
    tight = make_queue({'_retention': {'length': 2}})
    off = make_queue({'_retention': {'policy': 'disabled', 'length': 2}})
    post(driver, tight, project, 'a', 'b', 'c')
    post(driver, off, project, 'a', 'b', 'c')
    assert bodies(listed(driver, tight, project)) == ['b', 'c']
    assert bodies(listed(driver, off, project)) == ['a', 'b', 'c']


# (value, strings the error must show: the field, the value, the bound)
REFUSED = [
    ({'time': 101}, ['_retention.time', '101', '100']),
    ({'time': 0}, ['_retention.time', 'got 0', '100']),
    ({'length': 11}, ['_retention.length', '11', '10']),
    ({'length': 0}, ['_retention.length', 'got 0', '10']),
    ({'policy': 'disabled'}, ['_retention.policy', "'disabled'",
                              "'cleanup'"]),
    ({'policy': 'sometimes'}, ['_retention.policy', "'sometimes'",
                               "'cleanup'"]),
    ({'time': 'x'}, ['_retention.time', "'x'", '100']),
    ({'time': True}, ['_retention.time', 'True', '100']),
    ({'time': 1.5}, ['_retention.time', '1.5', '100']),
    ({'time': -1}, ['_retention.time', '-1', '100']),
    ({'length': None}, ['_retention.length', 'None', '10']),
    ({'consumers_required': -1}, ['_retention.consumers_required', '-1']),
    ({'bogus': 1}, ['_retention', "'bogus'", 'time']),
    ('x', ['_retention', "'x'", 'an object']),
    ([1], ['_retention', '[1]', 'an object']),
]


def refused_ids():
    return [repr(value) for value, _ in REFUSED]


def assert_named(error, shown):
    for text in shown:
        assert text in str(error), (text, str(error))


@operator(time=100, length=10)
@pytest.mark.parametrize('value, shown', REFUSED, ids=refused_ids())
def test_a_retention_that_loosens_or_is_malformed_is_refused_when_set(
        driver, project, value, shown):
    queues = through_pipeline(driver)
    with pytest.raises(errors.InvalidInput) as raised:
        queues.create('q', metadata={'_retention': value}, project=project)
    assert_named(raised.value, shown)
    # PUT answers 400 only to this class of storage error.
    assert isinstance(raised.value, storage_errors.FlavorDoesNotExist)
    assert not queues.exists('q', project=project)
    queues.create('q', metadata={'_retention': {'time': 5}},
                  project=project)
    with pytest.raises(errors.InvalidInput) as raised:
        queues.set_metadata('q', {'_retention': value}, project=project)
    assert_named(raised.value, shown)
    assert queues.get_metadata('q', project=project) == {
        '_retention': {'time': 5}}


@operator(time=100, length=10)
@pytest.mark.parametrize('value, shown', REFUSED, ids=refused_ids())
def test_a_retention_stored_behind_the_stage_is_refused_on_write(
        driver, make_queue, project, value, shown):
    queue = make_queue()
    driver.queue_controller.set_metadata(queue, {'_retention': value},
                                         project=project)
    with pytest.raises(errors.InvalidInput) as raised:
        post(driver, queue, project, 'x')
    assert_named(raised.value, shown)
    assert stats(driver, queue, project)['total'] == 0
    # A claim reads the queue's policy as a post does.
    with pytest.raises(errors.InvalidInput, match='_retention'):
        claim(driver, queue, project)
    # Reads go on with the operator's settings.
    assert driver.message_controller.stats(queue, project)['retention'][
        'time'] == 100


# -- cleanup and the removed count ------------------------------------------

@operator(time=60)
def test_clean_removes_in_batches_and_counts_each_removal_once(
        driver, make_queue, project, clock):
    queue = make_queue()
    messages = driver.message_controller
    post_each(driver, queue, project, *range(5))
    clock.advance(30)
    post(driver, queue, project, 'young')
    clock.advance(30)
    assert messages.clean(queue, project, 2) == (2, True)
    assert sum(clean_all(driver, queue, project, 2)) == 3
    assert messages.clean(queue, project, 2) == (0, False)
    assert removed(driver, queue, project) == 5
    assert bodies(listed(driver, queue, project)) == ['young']
    assert stats(driver, queue, project)['total'] == 1


@operator(time=60)
@pytest.mark.parametrize('how', ['claim', 'pop', 'pop one'])
def test_claims_and_clean_together_count_each_removal_once(
        driver, make_queue, project, clock, how):
    queue = make_queue()
    post(driver, queue, project, *range(30))
    clock.advance(60)
    post(driver, queue, project, 'young')
    assert take(driver, queue, project, how) == ['young']
    assert removed(driver, queue, project) <= 30
    clean_all(driver, queue, project, 7)
    assert removed(driver, queue, project) == 30
    assert driver.message_controller.clean(queue, project, 7) == (0, False)
    assert removed(driver, queue, project) == 30


@operator(length=1)
def test_clean_never_removes_a_claimed_message(driver, make_queue, project):
    queue = make_queue()
    messages = driver.message_controller
    claim_ids = []
    for name in ('a', 'b'):
        post(driver, queue, project, name)
        claim_id, got = claim(driver, queue, project)
        assert bodies(got) == [name]
        claim_ids.append(claim_id)
    post(driver, queue, project, 'c')
    assert messages.clean(queue, project, 10) == (0, False)
    counts = stats(driver, queue, project)
    assert (counts['total'], counts['claimed']) == (3, 2)
    for claim_id in claim_ids:
        driver.claim_controller.delete(queue, claim_id, project=project)
    assert clean_all(driver, queue, project, 10) == [2]
    assert removed(driver, queue, project) == 2
    assert bodies(listed(driver, queue, project,
                         include_claimed=True)) == ['c']


@operator(time=1000)
def test_a_dead_letter_move_is_not_a_retention_removal(driver, make_queue,
                                                       project, clock):
    dlq = 'dlq-' + uuid.uuid4().hex[:8]
    queue = make_queue({'_max_claim_count': 1, '_dead_letter_queue': dlq})
    post(driver, queue, project, 'poison')
    claim(driver, queue, project, ttl=60, grace=0)
    clock.advance(60)
    assert claim(driver, queue, project) == (None, [])
    assert bodies(listed(driver, dlq, project)) == ['poison']
    clean_all(driver, queue, project, 10)
    assert removed(driver, queue, project) == 0
    assert removed(driver, dlq, project) == 0


@operator(time=1000)
def test_a_group_move_is_not_a_retention_removal(driver, make_queue, project):
    grouped = {'_message_group_key': 'g'}
    target = make_queue(grouped)
    queue = make_queue(grouped)
    post(driver, queue, project, {'g': 'a', 'n': 1}, {'g': 'a', 'n': 2},
         {'g': 'b', 'n': 1})
    assert driver.message_controller.move_group(queue, 'a', target,
                                                project=project) == 2
    assert stats(driver, target, project)['total'] == 2
    assert removed(driver, queue, project) == 0
    assert removed(driver, target, project) == 0


@operator(time=1000)
def test_ttl_expiry_is_not_a_retention_removal(driver, make_queue, project,
                                               clock):
    queue = make_queue()
    post(driver, queue, project, *range(5), ttl=60)
    clock.advance(60)
    assert sum(clean_all(driver, queue, project, 2)) == 0
    assert removed(driver, queue, project) == 0
    assert stats(driver, queue, project)['total'] == 0


@operator(time=60, length=5)
def test_clean_with_nothing_to_remove(driver, make_queue, project, clock):
    messages = driver.message_controller
    queue = make_queue()
    assert messages.clean(queue, project, 10) == (0, False)
    post(driver, queue, project, *range(5))
    clock.advance(59)
    assert messages.clean(queue, project, 10) == (0, False)
    assert messages.clean('no-such-queue', project, 10) == (0, False)
    assert removed(driver, queue, project) == 0


@operator(time=60, tuples_per_iteration=2, iteration_delay=0.5)
def test_cleanup_removes_in_batches_with_a_pause_between_them(
        driver, make_queue, project, clock, monkeypatch):
    # SPEC §5: in batches of tuples_per_iteration, sleeping
    # iteration_delay between them (the sleep is recorded, not slept).
    queue = make_queue()
    post(driver, queue, project, *range(5))
    clock.advance(60)
    batches, pauses = [], []
    clean = driver.message_controller.clean

    def counted_clean(queue_, project_, batch):
        batches.append(batch)
        return clean(queue_, project_, batch)

    monkeypatch.setattr(driver.message_controller, 'clean', counted_clean)
    # Only the driver module's view of time: the stores' own waits (the
    # Swift driver's settle time) still sleep.
    monkeypatch.setattr(zaqar_delay_driver, 'time', types.SimpleNamespace(
        sleep=pauses.append, monotonic=time.monotonic))
    assert driver.clean_queue(queue, project) == 5
    assert set(batches) == {2}
    # A batch that came back full may have more behind it: 2, 2, then
    # 1 (or 2, 2, 1, 0), each after a pause.
    assert len(batches) in (3, 4)
    assert pauses == [0.5] * (len(batches) - 1)
    assert stats(driver, queue, project)['total'] == 0


@pytest.mark.parametrize('operator_config', [
    '[retention]\ntime = 60\ntuples_per_iteration = 2\n'], ids=['batch=2'])
def test_gc_removes_what_retention_no_longer_keeps(driver, make_queue,
                                                   project, clock):
    queue = make_queue()
    other = make_queue()
    post(driver, queue, project, *range(5))
    post(driver, other, project, 'expires', ttl=60)
    clock.advance(60)
    result = driver.gc()
    assert result.retention >= 5 and result.expired >= 1
    assert removed(driver, queue, project) == 5
    assert removed(driver, other, project) == 0
    assert stats(driver, queue, project)['total'] == 0
    driver.gc()
    assert removed(driver, queue, project) == 5


@operator(time=100, length=10)
@pytest.mark.parametrize('value', [{'time': 1000}, {'policy': 'disabled'},
                                   {'time': 'soon'}])
def test_cleanup_of_a_refused_retention_follows_the_operator(
        driver, make_queue, project, clock, value):
    # Tried: a _retention stored behind the stage (looser than the
    # operator's bounds, or malformed); clean and gc then remove what the
    # operator's time of 100 s no longer keeps, and count it.
    queue, other = make_queue(), make_queue()
    post(driver, queue, project, *range(3))
    post(driver, other, project, *range(2))
    for name in (queue, other):
        driver.queue_controller.set_metadata(name, {'_retention': value},
                                             project=project)
    clock.advance(100)
    assert clean_all(driver, queue, project, 10) == [3]
    assert removed(driver, queue, project) == 3
    driver.gc()
    assert removed(driver, other, project) == 2
    assert stats(driver, other, project)['total'] == 0


@operator(time=100)
def test_a_retention_the_operator_has_since_tightened_past_is_refused(
        driver, project, tmp_path):
    """A ``_retention`` accepted when set (time 50 under the operator's
    100) and an operator restarting with a tighter time (30): posts and
    claims refuse the queue's setting, naming it, and store or take
    nothing; reads and cleanup use the operator's 30."""
    queues = through_pipeline(driver)
    queues.create('q', metadata={'_retention': {'time': 50}},
                  project=project)
    post(driver, 'q', project, 'kept')
    tighter = tmp_path / 'tighter.conf'
    tighter.write_text('[retention]\ntime = 30\n')
    # What a restart with the new configuration builds.
    driver.message_controller._operator_retention = \
        retention.OperatorRetention(backends.make_conf(
            config_files=[tighter]))
    with pytest.raises(errors.InvalidInput) as raised:
        post(driver, 'q', project, 'refused')
    assert_named(raised.value, ['_retention', '50', '30'])
    with pytest.raises(errors.InvalidInput, match='_retention'):
        claim(driver, 'q', project)
    assert bodies(listed(driver, 'q', project)) == ['kept']
    assert driver.message_controller.stats('q', project)['retention'][
        'time'] == 30


@pytest.mark.parametrize('through', ['claim', 'zaqar purge'])
def test_ended_claims_not_settled_yet_hide_no_kept_message(
        driver, make_queue, project, clock, through):
    """Claims that ended and were not settled yet count as newer than
    each free message under `length`: as many as the length hid the
    whole queue on Redis, so a claim of one answered empty and Zaqar's
    purge stopped at its first pop."""
    from tests.contract.helpers import zaqar_purge
    queue = make_queue({'_retention': {'length': 10}})
    for round_ in range(3):
        post(driver, queue, project, *range(10 * round_, 10 * round_ + 10),
             ttl=3600)
        assert len(claim(driver, queue, project, limit=10, ttl=60,
                         grace=60)[1]) == 10
    clock.advance(61)
    if through == 'claim':
        assert len(claim(driver, queue, project, limit=1)[1]) == 1
    else:
        assert sorted(m['body'] for m in zaqar_purge(
            driver, queue, project)) == list(range(20, 30))
        assert listed(driver, queue, project) == []
