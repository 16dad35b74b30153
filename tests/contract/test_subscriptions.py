"""Zaqar's notification subscription contract."""

import pytest
from zaqar.storage import errors as storage_errors


def test_subscription_lifecycle(driver, make_queue, project):
    queue = make_queue()
    subs = driver.subscription_controller
    sid = subs.create(queue, 'http://127.0.0.1:9/a', 3600, {'x': 1},
                      project=project)
    assert sid
    assert subs.create(queue, 'http://127.0.0.1:9/a', 3600, {},
                       project=project) is None
    got = subs.get(queue, sid, project=project)
    assert (got['subscriber'], got['ttl'], got['options'], got['source'],
            got['confirmed']) == ('http://127.0.0.1:9/a', 3600, {'x': 1},
                                  queue, False)
    assert subs.exists(queue, sid, project=project)
    assert subs.get_with_subscriber(queue, 'http://127.0.0.1:9/a',
                                    project=project)['id'] == sid
    subs.update(queue, sid, project=project, ttl=7200,
                subscriber='http://127.0.0.1:9/b', options={'y': 2})
    got = subs.get(queue, sid, project=project)
    assert (got['subscriber'], got['ttl'], got['options']) == (
        'http://127.0.0.1:9/b', 7200, {'y': 2})
    subs.confirm(queue, sid, project=project, confirmed=True)
    assert subs.get(queue, sid, project=project)['confirmed'] is True
    subs.delete(queue, sid, project=project)
    assert not subs.exists(queue, sid, project=project)
    with pytest.raises(storage_errors.SubscriptionDoesNotExist):
        subs.get(queue, sid, project=project)
    assert subs.create(queue, 'http://127.0.0.1:9/a', 60, {},
                       project=project)


def test_update_to_a_taken_subscriber_conflicts(driver, make_queue, project):
    queue = make_queue()
    subs = driver.subscription_controller
    subs.create(queue, 'mailto:a@example.org', 600, {}, project=project)
    sid = subs.create(queue, 'mailto:b@example.org', 600, {}, project=project)
    with pytest.raises(storage_errors.SubscriptionAlreadyExists):
        subs.update(queue, sid, project=project,
                    subscriber='mailto:a@example.org')


def test_listing_pages_with_markers_and_isolates_projects(
        driver, make_queue, project):
    queue = make_queue()
    subs = driver.subscription_controller
    ids = [subs.create(queue, 'http://127.0.0.1:9/%d' % i, 600, {},
                       project=project) for i in range(5)]
    driver.queue_controller.create(queue, project=project + '-other')
    pages = subs.list(queue, project=project, limit=3)
    first = [s['id'] for s in next(pages)]
    marker = next(pages)
    pages = subs.list(queue, project=project, limit=3, marker=marker)
    assert first + [s['id'] for s in next(pages)] == ids
    assert list(next(subs.list(queue, project=project + '-other'))) == []


def test_listing_is_in_id_order_and_any_listed_id_is_a_marker(
        driver, make_queue, project):
    """Zaqar's clients page through subscriptions in id order: its WSGI
    suite sorts the ids of a listing and pages on from the tenth."""
    queue = make_queue()
    subs = driver.subscription_controller
    for i in range(15):
        subs.create(queue, 'http://127.0.0.1:9/%d' % i, 600, {},
                    project=project)
    listed = [s['id'] for s in next(subs.list(queue, project=project,
                                              limit=20))]
    assert len(listed) == 15
    assert listed == sorted(listed)
    after = next(subs.list(queue, project=project, marker=listed[9]))
    assert [s['id'] for s in after] == listed[10:]
