"""Concurrent posters get unique positions; concurrent claimers never share
a message. Threads on mongomock, processes on a real server."""

import collections
import json

import pytest

from tests.mongodb import workers
from zaqar_delay.drivers.mongodb import fields


pytestmark = pytest.mark.usefixtures('busy_switching')


def test_concurrent_posts_get_unique_positions(driver, project, real):
    driver.queue_controller.create('q', project=project)
    results = workers.run_all('produce', 6, driver, ('q', project, 40), real)
    ids = [mid for ids in results for mid in ids]
    assert len(ids) == len(set(ids)) == 240
    docs = list(driver.messages.raw.find(
        fields.queue_filter('q', project), {'k': True}))
    positions = [doc['k'] for doc in docs]
    assert len(docs) == 240
    assert len(set(positions)) == 240
    # Each poster's messages keep their posting order.
    listed = driver.messages.raw.find(
        fields.queue_filter('q', project)).sort('k', 1)
    by_client = collections.defaultdict(list)
    for doc in listed:
        by_client[doc['u']].append(json.loads(doc['b'])['n'])
    for order in by_client.values():
        assert order == sorted(order)


def test_concurrent_claims_never_hand_out_a_message_twice(driver, project,
                                                         real):
    driver.queue_controller.create('q', project=project)
    posted = workers.produce(driver, 'q', project, 150)
    results = workers.run_all('consume', 6, driver, ('q', project), real)
    handed = [mid for got in results for mid, _ in got]
    assert len(handed) == len(set(handed)), 'a message was handed out twice'
    assert sorted(handed) == sorted(posted)
    # Every message carries the one claim that got it.
    owner = {mid: cid for got in results for mid, cid in got}
    for doc in driver.messages.raw.find(fields.queue_filter('q', project)):
        assert doc['c'] == owner[doc['_id']]
        assert doc['cc'] == 1


def test_first_posts_to_a_new_queue_race_for_the_counter(driver, project,
                                                        real):
    driver.queue_controller.create('fresh', project=project)
    results = workers.run_all('produce', 8, driver, ('fresh', project, 1),
                              real)
    assert len({mid for ids in results for mid in ids}) == 8
    counter = driver.counters.raw.find_one(
        fields.queue_filter('fresh', project))
    assert counter['n'] == 8
