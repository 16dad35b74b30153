"""MongoDB: settling takes bounded batches, so no single operation grows
with a backlog of messages that fell due at once (issue 9, case 5)."""

from tests.contract.helpers import bodies, claim, listed, post
from zaqar_delay.drivers.mongodb import fields
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
