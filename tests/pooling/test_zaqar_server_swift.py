"""End to end: ``zaqar-server`` with ``pooling = True`` on two Swift
accounts of the test Swift as two pools (tests/pooling/zaqar_pools.py):
each queue's containers in the account its catalogue entry names, also
after a restart; delay and groups on each pool."""

import pytest
import swiftclient

from localstack.factories import swift as swift_factory
from tests.pooling import zaqar_pools
from zaqar_delay.drivers.swift import names

pytestmark = pytest.mark.integration

ACCOUNTS = {'pa': ('test:tester', 'testing'),
            'pb': ('test2:tester2', 'testing2')}


@pytest.fixture(scope='module')
def server(tmp_path_factory, swift_server):
    running = zaqar_pools.start_server(
        tmp_path_factory.mktemp('zd-pooling-swift'), 'delay.swift')
    zaqar_pools.register(running, {
        pool: swift_factory.swift_uri(swift_server, user, key)
        for pool, (user, key) in ACCOUNTS.items()})
    yield running
    running.stop()


def test_queues_live_in_their_pools_account_also_after_a_restart(
        server, swift_server):
    accounts = {pool: swift_server.get_auth(user, key)
                for pool, (user, key) in ACCOUNTS.items()}

    def holds(pool, project, queue):
        url, token = accounts[pool]
        try:
            swiftclient.head_container(
                url, token, names.container(names.MESSAGES, queue, project))
        except swiftclient.ClientException as exc:
            if exc.http_status == 404:
                return False
            raise
        return True

    zaqar_pools.queues_stay_on_their_pools(server, holds)
