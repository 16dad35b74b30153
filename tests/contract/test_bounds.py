"""Driver-level bounds from Zaqar's own ``[transport]`` limits.

Callers that bypass Zaqar's transport (zaqar-delay-groups, other tools)
meet the same bounds; an error names the field, the value and the bound,
and nothing changes.
"""

import pytest

from tests.contract.helpers import CLAIM, bodies, claim, listed, post, stats
from tests.contract.helpers import zaqar_purge
from zaqar_delay import errors


@pytest.fixture
def small_limits(conf):
    for name, value in (('max_message_ttl', 3600), ('max_claim_ttl', 600),
                        ('max_claim_grace', 120),
                        ('max_messages_per_claim_or_pop', 5),
                        ('max_messages_per_page', 7)):
        conf.set_override(name, value, group='transport')


def refused(call, *words):
    with pytest.raises(errors.InvalidInput) as raised:
        call()
    for word in words:
        assert str(word) in str(raised.value)


@pytest.mark.parametrize('ttl', [3601, 2 ** 62])
def test_message_ttl_is_bounded(driver, make_queue, project, small_limits,
                                ttl):
    queue = make_queue()
    post(driver, queue, project, 'ok', ttl=3600)
    refused(lambda: post(driver, queue, project, 'too long', ttl=ttl),
            'ttl', ttl, 3600)
    assert [m['body'] for m in listed(driver, queue, project, limit=7)] == [
        'ok']


@pytest.mark.parametrize('meta, words', [
    ({'ttl': 601, 'grace': 0}, ('claim ttl', 601, 600)),
    ({'ttl': 10 ** 15, 'grace': 0}, ('claim ttl', 10 ** 15, 600)),
    ({'ttl': 60, 'grace': 121}, ('claim grace', 121, 120)),
])
def test_claim_ttl_and_grace_are_bounded(driver, make_queue, project,
                                         small_limits, meta, words):
    queue = make_queue()
    post(driver, queue, project, 'a')
    refused(lambda: driver.claim_controller.create(queue, meta,
                                                   project=project), *words)
    assert stats(driver, queue, project)['claimed'] == 0
    claim_id, _ = claim(driver, queue, project, limit=1)
    refused(lambda: driver.claim_controller.update(queue, claim_id, meta,
                                                   project=project), *words)


def test_claim_and_pop_limits_are_bounded(driver, make_queue, project,
                                          small_limits):
    queue = make_queue()
    post(driver, queue, project, *range(10))
    refused(lambda: driver.claim_controller.create(queue, CLAIM,
                                                   project=project, limit=6),
            'limit', 6, 5)
    # A pop's bound is never below the 100 Zaqar's own queue purge pops at
    # a time (clients' pops are bounded by Zaqar's transport first).
    refused(lambda: driver.message_controller.pop(queue, 101,
                                                  project=project),
            'limit', 101, 100)
    assert stats(driver, queue, project)['free'] == 10
    assert len(claim(driver, queue, project, limit=5)[1]) == 5


def test_a_pop_takes_what_zaqars_purge_asks_for(driver, make_queue, project,
                                                small_limits):
    """Zaqar's POST /v2/queues/{name}/purge pops 100 at a time, whatever
    max_messages_per_claim_or_pop says (here 5)."""
    queue = make_queue()
    post(driver, queue, project, *range(10))
    popped = driver.message_controller.pop(queue, 100, project=project)
    assert sorted(m['body'] for m in popped) == list(range(10))
    assert stats(driver, queue, project)['total'] == 0


# More than a pop of 100 looks at on Redis (twice its limit, then 100
# more) before it answers.
EXPIRED_AHEAD = 310


@pytest.mark.parametrize('client_bound', [20, 100])
def test_zaqars_purge_empties_a_queue_behind_a_run_of_expired_messages(
        driver, make_queue, project, clock, client_bound):
    """A pop bounds its work, so one that meets only expired messages
    could answer empty: Zaqar's purge reads that as an empty queue and
    stops. A pop never answers empty while live messages wait behind the
    run, whether it is Zaqar's purge or (the operator lets clients pop
    100) an ordinary pop."""
    queue = make_queue()
    for start in range(0, EXPIRED_AHEAD, 100):
        post(driver, queue, project,
             *range(start, min(start + 100, EXPIRED_AHEAD)), ttl=60)
    post(driver, queue, project, 'live-1', 'live-2', ttl=3600)
    clock.advance(61)
    assert bodies(zaqar_purge(driver, queue, project,
                              client_bound)) == ['live-1', 'live-2']
    assert bodies(listed(driver, queue, project, include_claimed=True,
                         include_delayed=True)) == []
    assert stats(driver, queue, project)['total'] == 0


def test_list_limit_is_bounded(driver, make_queue, project, small_limits):
    queue = make_queue()
    post(driver, queue, project, *range(10))
    refused(lambda: next(driver.message_controller.list(
        queue, project=project, limit=8)), 'limit', 8, 7)
    page = next(driver.message_controller.list(queue, project=project,
                                               limit=7))
    assert len(list(page)) == 7
