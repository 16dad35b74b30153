"""Swift: what a post costs with Zaqar's notifier on, counted in Swift
requests (never timed); and consumers an earlier release stored under
``s/``."""

from localstack import notifier
from tests.contract.helpers import post
from tests.swift.requests import Requests
from zaqar_delay import stages
from zaqar_delay.drivers.swift import names


def test_a_post_costs_the_same_with_12_consumers_as_with_none(
        driver, make_queue, project, monkeypatch):
    queue = make_queue()
    notifying = notifier.notifying(driver)
    subs = driver.subscription_controller
    counted = Requests(driver, monkeypatch)
    post(notifying, queue, project, 'warm-up')
    alone = counted.during(lambda: post(notifying, queue, project, 'a'))
    for _ in range(12):
        subs.create(queue, notifier.consumer_subscriber(), 3600, {},
                    project=project)
    among_consumers = counted.during(
        lambda: post(notifying, queue, project, 'b'))
    assert among_consumers == alone


def test_a_consumer_stored_under_s_by_an_earlier_release_still_works(
        driver, make_queue, project):
    queue = make_queue()
    subs = driver.subscription_controller
    subscriber = notifier.consumer_subscriber()
    sid = subs.create(queue, subscriber, 3600, {'k': 1}, project=project)
    container = names.container(names.SUBSCRIPTIONS, queue, project)
    # Moved back where an earlier release stored it.
    store = driver.store
    data = store.get(container, names.subscription_obj(sid, True))[1]
    store.put(container, names.subscription_obj(sid), data,
              content_type='application/json')
    store.delete(container, names.subscription_obj(sid, True))
    assert subs.get_with_subscriber(queue, subscriber, project)['id'] == sid
    # Listed to the notifier as before (its task sends nothing), and once
    # by the REST API.
    assert [s['id'] for s in next(subs.list(queue, project))] == [sid]
    subs.update(queue, sid, project=project, options={'k': 2})
    assert subs.get(queue, sid, project=project)['options']['k'] == 2
    rest = stages.SubscriptionStage(driver, None).list(queue, project=project)
    assert [(s['id'], s['options']) for s in next(rest)] == [(sid, {'k': 2})]
    subs.delete(queue, sid, project=project)
    assert not subs.exists(queue, sid, project=project)
    assert list(next(subs.list(queue, project))) == []
