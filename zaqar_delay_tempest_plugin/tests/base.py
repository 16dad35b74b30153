"""What every zaqar-delay API test shares: the client, queues that clean up
after themselves, and claims that wait for a message to become due."""

import time

from tempest import config
from tempest.lib.common.utils import data_utils
from zaqar_tempest_plugin.tests import base

from zaqar_delay_tempest_plugin.services import client

CONF = config.CONF


class ZaqarDelayTest(base.BaseV2MessagingTest):

    @classmethod
    def setup_clients(cls):
        super(ZaqarDelayTest, cls).setup_clients()
        cls.client = client.DelayMessagingClient(
            cls.os_primary.auth_provider,
            CONF.messaging.catalog_type,
            CONF.identity.region,
            build_interval=CONF.compute.build_interval,
            build_timeout=CONF.compute.build_timeout)

    @classmethod
    def resource_setup(cls):
        super(ZaqarDelayTest, cls).resource_setup()
        cls.max_delay = CONF.zaqar_delay.max_message_delay

    def make_queue(self, **metadata):
        """A new queue with ``metadata``, deleted when the test ends."""
        name = data_utils.rand_name('zd')
        self.client.create_queue_with_metadata(name, metadata)
        self.addCleanup(self.client.delete_queue, name)
        return name

    def post(self, queue, *messages):
        _, body = self.client.post_messages(queue,
                                            {'messages': list(messages)})
        return body['resources']

    def bodies(self, queue, **params):
        _, body = self.client.list_messages_with(queue, **params)
        return [message['body'] for message in body['messages']]

    def claim(self, queue, **kwargs):
        return self.client.claim(queue, **kwargs)[1]

    def claim_bodies(self, queue, **kwargs):
        return [message['body'] for message in self.claim(queue, **kwargs)]

    def release(self, claim_href):
        self.client.delete_claim(self.client.relative(claim_href))

    def delete(self, message):
        self.client.delete_messages(self.client.relative(message['href']))

    def claim_when_due(self, queue):
        """Claim until something is handed out or ``due_timeout`` passes.

        For messages that become due after a short delay: the test checks
        that they do become claimable, never how fast, so a slow machine
        cannot fail it.
        """
        deadline = time.monotonic() + CONF.zaqar_delay.due_timeout
        while True:
            claimed = self.claim(queue)
            if claimed or time.monotonic() > deadline:
                return claimed
            time.sleep(0.5)

    def stats(self, queue):
        return self.client.show_queue_stats(queue)[1]['messages']
