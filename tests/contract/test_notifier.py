"""Zaqar's notifier (``message_pipeline = zaqar.notification.notifier``)
lists a queue's subscriptions on every post, straight from the driver's
subscription controller: the drivers leave the persistent consumers
(``cursor:`` subscribers, which read by listing) out of that listing, and
Zaqar's REST API, which lists through our subscription stage, still sees
every subscription (zaqar_delay/stages.py)."""

from localstack import notifier
from tests.contract.helpers import post
from zaqar_delay import stages


def rest_listing(driver, queue, project, **kwargs):
    """Ids as ``GET /v2/queues/<queue>/subscriptions`` lists them: through
    the pipeline, our subscription stage first."""
    pages = stages.SubscriptionStage(driver, None).list(
        queue, project=project, **kwargs)
    return [sub['id'] for sub in next(pages)], next(pages)


def notified_listing(driver, queue, project, limit=10):
    """Every id Zaqar's notifier reaches, paging as it does."""
    subs = driver.subscription_controller
    out, marker = [], None
    while True:
        pages = subs.list(queue, project, marker=marker, limit=limit)
        out += [sub['subscriber'] for sub in next(pages)]
        marker = next(pages)
        if not marker:
            return out


def test_the_notifier_lists_no_consumer_the_rest_api_lists_all(
        driver, make_queue, project):
    queue = make_queue()
    subs = driver.subscription_controller
    hooks = ['http://127.0.0.1:9/%d' % i for i in range(3)]
    created = []
    for hook in hooks:
        for _ in range(2):
            created.append(subs.create(queue, notifier.consumer_subscriber(),
                                       3600, {}, project=project))
        created.append(subs.create(queue, hook, 3600, {}, project=project))
    # Pages of one: each marker leads on to the next webhook.
    assert notified_listing(driver, queue, project, limit=1) == hooks
    assert notified_listing(driver, queue, project) == hooks
    listed, marker = rest_listing(driver, queue, project, limit=20)
    assert listed == created
    first, marker = rest_listing(driver, queue, project, limit=4)
    rest, _ = rest_listing(driver, queue, project, marker=marker)
    assert first + rest == created


def test_a_subscriber_changed_to_or_from_a_consumer_follows(
        driver, make_queue, project):
    queue = make_queue()
    subs = driver.subscription_controller
    sid = subs.create(queue, 'http://127.0.0.1:9/a', 3600, {},
                      project=project)
    subs.update(queue, sid, project=project,
                subscriber=notifier.consumer_subscriber())
    assert notified_listing(driver, queue, project) == []
    subs.update(queue, sid, project=project, subscriber='mailto:a@b.example')
    assert notified_listing(driver, queue, project) == ['mailto:a@b.example']
    subs.delete(queue, sid, project=project)
    assert notified_listing(driver, queue, project) == []
    assert rest_listing(driver, queue, project) == ([], None)


def test_a_webhook_is_notified_of_a_post_among_consumers(
        driver, make_queue, project):
    queue = make_queue()
    notifying = notifier.notifying(driver)
    subs = driver.subscription_controller
    with notifier.webhook_receiver() as (url, received):
        for _ in range(3):
            subs.create(queue, notifier.consumer_subscriber(), 3600, {},
                        project=project)
        subs.create(queue, url, 3600, {}, project=project)
        post(notifying, queue, project, 'first', 'second')
        got = [received.get(timeout=30) for _ in range(2)]
    assert sorted(m['body'] for m in got) == ['first', 'second']
    assert {(m['queue_name'], m['Message_Type']) for m in got} == {
        (queue, 'Notification')}
