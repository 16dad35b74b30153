"""MongoDB: what a post costs with Zaqar's notifier on, counted in
requests on mongomock (benchmarks/round_trips.py: outermost collection
calls), never timed."""

import pytest

from benchmarks import round_trips
from localstack import notifier
from tests.contract.helpers import post


@pytest.fixture
def on_mongomock():
    from localstack.factories import mongodb as mongodb_factory
    if mongodb_factory.real_server_uri():
        pytest.skip('counts calls on mongomock')


def test_a_post_costs_the_same_with_25_consumers_as_with_none(
        driver, make_queue, project, on_mongomock):
    queue = make_queue()
    notifying = notifier.notifying(driver)
    subs = driver.subscription_controller
    post(notifying, queue, project, 'warm-up')

    def requests():
        with round_trips.mongodb_counting() as sent:
            post(notifying, queue, project, *range(10))
        return sent

    alone = requests()
    for _ in range(25):
        subs.create(queue, notifier.consumer_subscriber(), 3600, {},
                    project=project)
    # Making a consumer forgets the queue's metadata copy (it records
    # whether the queue has one): the next post fills it again, once.
    post(notifying, queue, project, 'refills the copy')
    assert requests() == alone


def test_a_page_after_a_deleted_marker_goes_on_from_it(driver, project):
    # Zaqar's notifier pages through a queue's subscriptions on every
    # post; one deleted between two pages once sent the next page back to
    # the start, and the first page's subscribers were notified twice.
    driver.queue_controller.create('q', project=project)
    created = [driver.subscription_controller.create(
        'q', 'http://example.com/%d' % n, 3600, {}, project=project)
        for n in range(5)]
    pages = driver.subscription_controller.list('q', project=project,
                                                limit=2)
    first = [sub['id'] for sub in next(pages)]
    marker = next(pages)
    assert first == created[:2] and marker == created[1]
    driver.subscription_controller.delete('q', marker, project=project)
    pages = driver.subscription_controller.list('q', project=project,
                                                marker=marker, limit=2)
    assert [sub['id'] for sub in next(pages)] == created[2:4]
