"""MongoDB: settling takes bounded batches, so no single operation grows
with a backlog of messages that fell due at once (issue 9, case 5)."""

from tests.contract.helpers import bodies, claim, listed, post
from zaqar_delay.drivers.mongodb import claims
from zaqar_delay.drivers.mongodb import connection
from zaqar_delay.drivers.mongodb import fields
from zaqar_delay.drivers.mongodb import groups
from zaqar_delay.drivers.mongodb import state


def test_due_messages_are_promoted_in_bounded_batches(driver, project,
                                                      clock, monkeypatch):
    monkeypatch.setattr(state, 'SETTLE_BATCH', 10)
    driver.queue_controller.create(
        'q', metadata={'_default_message_delay': 60}, project=project)
    post(driver, 'q', project, *range(50))
    late = post(driver, 'q', project, 'late', delay=600)[0]
    clock.advance(61)
    state.settle(driver, 'q', project, driver.now())
    ready = driver.messages.raw.count_documents(
        fields.queue_filter('q', project, s=fields.READY))
    assert ready == 10
    # Each claim settles the next batch: the backlog drains, in order,
    # and the message that is not due yet is never handed out.
    handed = []
    for _ in range(20):
        _, got = claim(driver, 'q', project, limit=5)
        assert late not in [m['id'] for m in got]
        handed += bodies(got)
    assert handed == list(range(50))
    assert [m['id'] for m in listed(driver, 'q', project,
                                    include_delayed=True)] == [late]


def test_a_claim_dead_letters_a_bounded_run_and_a_pop_goes_past_it(
        driver, project, monkeypatch):
    """A claim of one behind 30 exhausted messages moved all 30 before it
    answered; now twice its limit and DEAD_LETTER_BATCH (here 5) at most,
    then it answers short and the next claim goes on. A pop goes on to a
    message: an empty one reads as an empty queue (Zaqar's purge)."""
    monkeypatch.setattr(claims, 'DEAD_LETTER_BATCH', 5)
    driver.queue_controller.create('dlq', project=project)
    driver.queue_controller.create('q', project=project, metadata={
        '_max_claim_count': 1, '_dead_letter_queue': 'dlq'})
    post(driver, 'q', project, *range(30))
    claim_id, got = claim(driver, 'q', project, limit=30)
    driver.claim_controller.delete('q', claim_id, project=project)
    post(driver, 'q', project, 'live')

    def dead_letters():
        return driver.messages.raw.count_documents(
            fields.queue_filter('dlq', project))

    assert claim(driver, 'q', project, limit=1)[1] == []
    assert dead_letters() == 2 * 1 + 5
    popped = driver.message_controller.pop('q', 1, project=project)
    assert bodies(popped) == ['live'] and dead_letters() == 30


def largest_deletes(monkeypatch, collection):
    """The documents each delete_many request removes from now on, for
    every collection of ``collection``'s class (mongomock or pymongo)."""
    removed = []
    kind = type(collection.raw)
    delete_many = kind.delete_many

    def counted(self, *args, **kwargs):
        result = delete_many(self, *args, **kwargs)
        removed.append(result.deleted_count)
        return result

    monkeypatch.setattr(kind, 'delete_many', counted)
    return removed


def test_a_queue_deletion_removes_what_a_tenant_made_in_batches(
        driver, project, monkeypatch):
    """Tried: a queue with 25 claims, pins, sticky clients, given-up
    positions and moves, deleted. Each of those went in one delete_many
    of the whole lot, work that grows with what the tenant made; now
    DELETE_BATCH (here 10) at a time, and all of it goes."""
    monkeypatch.setattr(connection, 'DELETE_BATCH', 10)
    driver.queue_controller.create('q', project=project)
    made = {
        'claims': lambda n: {'e': n},
        'pins': lambda n: {fields.GROUP: str(n)},
        'sticky_clients': lambda n: {fields.PIN_CLIENT: str(n)},
        'given_up': lambda n: {fields.POSITION: n},
        'moves': lambda n: {'g': str(n), 'st': 'a', 'v': n},
    }
    for name, doc in made.items():
        getattr(driver, name).raw.insert_many([
            fields.queue_filter('q', project, **doc(n)) for n in range(25)])
    removed = largest_deletes(monkeypatch, driver.claims)
    # What Zaqar's queue deletion runs through our stage (stages.py).
    driver.message_controller._purge_queue('q', project)
    assert removed and max(removed) <= 10, removed
    for name in made:
        assert getattr(driver, name).raw.count_documents(
            fields.queue_filter('q', project)) == 0, name


def test_a_group_purge_deletes_from_the_tail_in_batches(driver, project,
                                                        monkeypatch):
    monkeypatch.setattr(groups, 'PURGE_BATCH', 10)
    driver.queue_controller.create(
        'q', metadata={'_message_group_key': 'g'}, project=project)
    post(driver, 'q', project, *[{'g': 'a', 'n': n} for n in range(25)])
    post(driver, 'q', project, {'g': 'b', 'n': 0})
    removed = largest_deletes(monkeypatch, driver.messages)
    assert driver.message_controller.purge_group('q', 'a',
                                                 project=project) == 25
    assert removed and max(removed) <= 10, removed
    assert bodies(listed(driver, 'q', project)) == [{'g': 'b', 'n': 0}]
