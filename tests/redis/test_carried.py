"""Redis: a move run again skips what it carried in before, even once a
consumer deleted it longer ago than ``deleted_id_memory`` (``Q:carried``,
post.lua; docs/migration.md). The whole command is tested in tests/migrate.
"""

from tests.contract.helpers import bodies, listed, moved
from tests.contract.test_queue_stage import through_pipeline
from tests.redis.test_layout import raw  # noqa: F401 (a fixture)
from zaqar_delay.drivers.redis import driver as redis_driver
from zaqar_delay.drivers.redis import keys


def carried_key(queue, project):
    return keys.queue_prefix(queue, project) + ':carried'


def test_what_was_deleted_long_ago_is_not_carried_in_again(
        driver, raw, make_queue, project, clock):
    queue = make_queue()
    messages = moved(driver, queue, project, 'acked', 'popped', 'kept',
                     ttl=3600)
    controller = driver.message_controller
    controller.carry_in(queue, project, messages, 'c')
    controller.delete(queue, messages[0].id, project=project)
    assert bodies(controller.pop(queue, 1, project=project)) == ['popped']
    # Long enough for the deletions to be forgotten (gc forgets them).
    clock.advance(driver.store_conf.deleted_id_memory + 1)
    driver.gc()
    assert raw.zcard(keys.queue_prefix(queue, project) + ':deleted') == 0
    controller.carry_in(queue, project, messages, 'c')
    assert bodies(listed(driver, queue, project)) == ['kept']


def test_ids_stored_without_the_memory_are_remembered_when_carried(
        driver, raw, make_queue, project):
    # As a run stopped after storing, or a release before the memory,
    # left them: stored, not remembered.
    queue = make_queue()
    messages = moved(driver, queue, project, 'a', 'b')
    driver.message_controller._insert(queue, project, messages, 'c')
    assert raw.zcard(carried_key(queue, project)) == 0
    driver.message_controller.carry_in(queue, project, messages, 'c')
    assert bodies(listed(driver, queue, project)) == ['a', 'b']
    assert raw.zcard(carried_key(queue, project)) == 2


def test_a_carried_id_is_forgotten_an_hour_after_its_message_expired(
        driver, raw, make_queue, project, clock):
    queue = make_queue()
    [message] = moved(driver, queue, project, 'a', ttl=300, age_ms=100000)
    driver.message_controller.carry_in(queue, project, [message], 'c')
    key = carried_key(queue, project)
    # Its message expires 200 s from now, in the source as here.
    assert raw.zscore(key, message.id) == clock.now_ms + 200000 + 3600000
    clock.advance(200 + 3600 - 1)
    driver.gc()
    assert raw.zscore(key, message.id) is not None
    clock.advance(2)
    driver.gc()
    assert raw.zscore(key, message.id) is None


def test_one_gc_pass_forgets_every_expired_carried_id(
        driver, raw, make_queue, project, clock):
    # A large move's ids expire together: gc repeats its bounded step
    # until they are all forgotten, not one batch per pass.
    # (Consumed first: gc's removal of expired messages would repeat the
    # step on its own.)
    queue = make_queue()
    messages = moved(driver, queue, project,
                     *range(3 * redis_driver.GC_BATCH + 7))
    driver.message_controller.carry_in(queue, project, messages, 'c')
    driver.message_controller.bulk_delete(
        queue, [message.id for message in messages], project=project)
    clock.advance(300 + 3600 + 1)
    driver.gc()
    assert raw.zcard(carried_key(queue, project)) == 0


def test_deleting_the_queue_forgets_its_carried_ids(driver, raw, make_queue,
                                                    project):
    queue = make_queue()
    driver.message_controller.carry_in(
        queue, project, moved(driver, queue, project, 'a'), 'c')
    assert raw.exists(carried_key(queue, project))
    through_pipeline(driver).delete(queue, project=project)
    assert not raw.exists(carried_key(queue, project))
