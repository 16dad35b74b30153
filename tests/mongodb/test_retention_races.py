"""MongoDB retention under concurrency.

Forced interleavings (as test_races.py): a second operation runs at the
exact point between a cleaner's finding and its delete. The stress run
(producers overflowing a length-bounded queue while consumers claim and
two cleaners run, no claim returning a message below the length floor)
is in tests/multiprocess/test_retention.py.
"""

from tests.contract.helpers import bodies, claim, listed, post
from tests.mongodb.test_races import before_call, before_hand_out
from zaqar_delay import retention
from zaqar_delay import rules
from zaqar_delay.drivers.mongodb import fields


def is_retention_delete(where, *args, **kwargs):
    return '_id' in where and fields.STATE in where and (
        '$or' in where or fields.POSITION in where
        or fields.CREATED in where)


def removed(driver, queue, project):
    return driver.message_controller.stats(
        queue, project)['retention']['removed']


def test_two_cleaners_never_count_a_removal_twice(driver, project,
                                                  make_queue, monkeypatch):
    queue = make_queue({'_retention': {'length': 2}})
    post(driver, queue, project, *range(8))
    other = []

    def second_cleaner_runs_first():
        other.append(driver.message_controller.clean(queue, project, 100))

    fired = before_call(monkeypatch, driver.messages, 'delete_many',
                        second_cleaner_runs_first, when=is_retention_delete)
    # Both found the same 6 messages; the second deleted them first.
    assert driver.message_controller.clean(queue, project, 100) == (0,
                                                                    False)
    assert fired and other == [(6, False)]
    monkeypatch.undo()
    assert removed(driver, queue, project) == 6
    assert bodies(listed(driver, queue, project)) == [6, 7]


def test_a_message_claimed_before_the_delete_is_not_removed(
        driver, project, make_queue, monkeypatch):
    """The cleaner judged 'a' out; before it deletes, a claim whose view
    predates that (here: a policy read before the queue had retention)
    takes 'a'. The delete leaves the claimed message; once the claim
    ends, 'a' is gone for good."""
    queue = make_queue({'_retention': {'length': 2}})
    post(driver, queue, project, 'a', 'b', 'c')
    taken = []

    def an_earlier_claim_takes_a():
        monkeypatch.undo()
        policy = rules.QueuePolicy(retention=retention.NONE)
        taken.append(driver.claim_controller.take(
            queue, project, 1, policy, 'claim', ttl=60))

    fired = before_call(monkeypatch, driver.messages, 'delete_many',
                        an_earlier_claim_takes_a, when=is_retention_delete)
    assert driver.message_controller.clean(queue, project, 10) == (0, False)
    claim_id, got = taken[0]
    assert fired and bodies(got) == ['a']
    assert removed(driver, queue, project) == 0
    assert bodies(listed(driver, queue, project, include_claimed=True)
                  ) == ['a', 'b', 'c']
    driver.claim_controller.delete(queue, claim_id, project=project)
    assert bodies(listed(driver, queue, project)) == ['b', 'c']
    driver.message_controller.clean(queue, project, 10)
    assert removed(driver, queue, project) == 1


def test_an_expired_message_is_left_to_expiry_uncounted(
        driver, project, make_queue, clock):
    queue = make_queue({'_retention': {'length': 1}})
    post(driver, queue, project, 'short', ttl=60)
    post(driver, queue, project, 'long')
    clock.advance(61)
    # 'short' would be beyond length, but it expired: TTL removes it.
    assert driver.message_controller.clean(queue, project, 10) == (0, False)
    driver.gc()
    assert removed(driver, queue, project) == 0
    assert driver.messages.raw.count_documents(
        fields.queue_filter(queue, project)) == 1


def test_a_claim_racing_a_removal_never_gets_a_removed_message(
        driver, project, make_queue, monkeypatch):
    """The claimer found its candidates before a cleaner removed them:
    its conditional update takes none of them, and it takes the next."""
    queue = make_queue({'_retention': {'length': 2}})
    post(driver, queue, project, 'a', 'b', 'c')

    def newer_posts_and_a_cleaner_run():
        monkeypatch.undo()
        post(driver, queue, project, 'd', 'e')
        driver.message_controller.clean(queue, project, 10)

    fired = before_hand_out(monkeypatch, driver,
                            newer_posts_and_a_cleaner_run)
    got = bodies(claim(driver, queue, project, limit=1)[1])
    assert fired
    assert got == ['d']
    assert removed(driver, queue, project) == 3
