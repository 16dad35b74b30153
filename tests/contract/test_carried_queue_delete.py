"""A queue deleted and created again, then moved into again
(docs/migration.md, step 6): Redis and Swift forget the ids a move
carried into a queue with the queue, so the move brings its messages
back, even one consumed before the delete; MongoDB keeps its records
per project until they expire, so it skips them."""

from tests.contract.helpers import bodies, listed, moved
from tests.contract.test_queue_stage import through_pipeline


def test_a_move_run_again_into_a_queue_deleted_and_created_again(
        driver, backend_name, make_queue, project):
    queue = make_queue()
    messages = moved(driver, queue, project, 'consumed', 'kept')
    controller = driver.message_controller
    controller.carry_in(queue, project, messages, 'c')
    controller.delete(queue, messages[0].id, project=project)
    # Without the delete, the move skips both
    # (tests/{redis,mongodb,swift}/test_carried.py).
    # As Zaqar deletes a queue: our stage first.
    through_pipeline(driver).delete(queue, project=project)
    driver.queue_controller.create(queue, project=project)
    controller.carry_in(queue, project, messages, 'c')
    back = [] if backend_name == 'mongodb' else ['consumed', 'kept']
    assert bodies(listed(driver, queue, project)) == back
