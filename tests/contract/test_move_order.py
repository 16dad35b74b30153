"""Moved groups and dead letters keep position order, whoever posted them
(batching by poster used to turn A1 B1 A2 B2 into A1 A2 B1 B2)."""

from tests.contract.helpers import CLIENT, OTHER_CLIENT, claim, listed, post

ORDER = ['A1', 'B1', 'A2', 'B2']


def post_interleaved(driver, queue, project, body):
    for name in ORDER:
        post(driver, queue, project, body(name),
             client=CLIENT if name[0] == 'A' else OTHER_CLIENT)


def test_dead_letters_keep_position_order(driver, make_queue, project,
                                          clock):
    dlq = make_queue()
    queue = make_queue({'_max_claim_count': 1, '_dead_letter_queue': dlq})
    post_interleaved(driver, queue, project, lambda name: name)
    claim(driver, queue, project, ttl=60)
    clock.advance(60)
    assert claim(driver, queue, project) == (None, [])
    assert [m['body'] for m in listed(driver, dlq, project)] == ORDER


def test_a_moved_group_keeps_position_order(driver, make_queue, project):
    target = make_queue()
    queue = make_queue({'_message_group_key': 'g'})
    post_interleaved(driver, queue, project,
                     lambda name: {'g': 'one', 'n': name})
    assert driver.message_controller.move_group(queue, 'one', target,
                                                project=project) == 4
    assert [m['body']['n'] for m in listed(driver, target, project)] == ORDER
