"""Concurrent advances of one headless group promote exactly one head.
Threads on mongomock, spawned processes on a real server
(ZAQAR_DELAY_TEST_MONGODB_URI). The group rules under competing
consumers are in tests/multiprocess/test_groups.py."""

import pytest

from tests.mongodb import workers
from zaqar_delay.drivers.mongodb import fields

pytestmark = pytest.mark.usefixtures('busy_switching')

GROUPED = {'_message_group_key': 'g'}


def test_concurrent_advances_promote_exactly_one_head(driver, project,
                                                     real):
    driver.queue_controller.create('q', metadata=GROUPED, project=project)
    ids = workers.produce_grouped(driver, 'q', project, ['x'], 20)
    # Take the group's head away without advancing it (a crash).
    driver.messages.raw.delete_one({'_id': ids[0]})
    heads = workers.run_all('advance_group', 8, driver,
                            ('q', project, '"x"'), real)
    assert set(heads) == {ids[1]}
    stored = list(driver.messages.raw.find(
        fields.queue_filter('q', project)))
    assert [doc['_id'] for doc in stored if 'h' in doc] == [ids[1]]
    assert sorted(doc['s'] for doc in stored) == ['b'] * 18 + ['r']
