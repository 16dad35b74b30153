"""Bounded redelivery: ``_max_claim_count``, ``_dead_letter_queue``,
``_dead_letter_queue_messages_ttl`` and ``_redelivery_delay``."""

from tempest.lib.common.utils import data_utils
from tempest.lib import decorators

from zaqar_delay_tempest_plugin.tests import base


class RedeliveryTest(base.ZaqarDelayTest):

    def claim_and_release(self, queue):
        href, claimed = self.client.claim(queue)
        self.release(href)
        return claimed

    @decorators.idempotent_id('415b91f1-cd34-47d6-adb2-0c9c8f835573')
    def test_exhausted_message_moves_to_the_dead_letter_queue(self):
        # The dead-letter queue is created on first use; delete it after.
        dead = data_utils.rand_name('zd-dead')
        self.addCleanup(self.client.delete_queue, dead)
        queue = self.make_queue(_max_claim_count=2, _dead_letter_queue=dead,
                                _dead_letter_queue_messages_ttl=3600)
        href, = self.post(queue, {'ttl': 900, 'body': {'n': 'poison'}})
        for _ in range(2):
            self.assertEqual([{'n': 'poison'}],
                             [m['body'] for m in
                              self.claim_and_release(queue)])
        self.assertEqual([], self.claim(queue))
        self.assertEqual(0, self.stats(queue)['total'])
        moved = self.client.list_messages_with(dead)[1]['messages']
        self.assertEqual([{'n': 'poison'}], [m['body'] for m in moved])
        self.assertEqual(href.rsplit('/', 1)[1], moved[0]['id'])
        self.assertEqual(3600, moved[0]['ttl'])

    @decorators.idempotent_id('43c1363c-365a-42be-a431-9109ca276e8c')
    def test_exhausted_message_without_dead_letter_queue_is_dropped(self):
        queue = self.make_queue(_max_claim_count=1)
        self.post(queue, {'ttl': 900, 'body': {'n': 'poison'}})
        self.claim_and_release(queue)
        self.assertEqual([], self.claim(queue))
        self.assertEqual(0, self.stats(queue)['total'])

    @decorators.idempotent_id('26fd60fd-c98b-4048-99bf-94e3796032c6')
    def test_redelivery_delay_holds_a_released_message(self):
        queue = self.make_queue(_redelivery_delay=600)
        self.post(queue, {'ttl': 900, 'body': {'n': 1}})
        self.claim_and_release(queue)
        self.assertEqual([], self.claim(queue))
        stats = self.stats(queue)
        self.assertEqual((1, 0, 1), (stats['total'], stats['claimed'],
                                     stats['delayed']))

    @decorators.idempotent_id('ccb33e4a-d9cd-40b1-8e18-a30721503970')
    def test_released_message_is_claimable_after_redelivery_delay(self):
        queue = self.make_queue(_redelivery_delay=1)
        href, = self.post(queue, {'ttl': 900, 'body': {'n': 1}})
        self.claim_and_release(queue)
        again = self.claim_when_due(queue)
        self.assertEqual([href.rsplit('/', 1)[1]], [m['id'] for m in again])
