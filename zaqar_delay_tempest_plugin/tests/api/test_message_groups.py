"""Message groups: ``_message_group_key``, one head per group, stats."""

from tempest.lib import decorators

from zaqar_delay_tempest_plugin.tests import base


def cart(group, step):
    return {'ttl': 900, 'body': {'cart': group, 'step': step}}


class MessageGroupTest(base.ZaqarDelayTest):

    @decorators.idempotent_id('4d6b9f8a-a513-4eb3-898c-33e8dde7451c')
    def test_a_claim_takes_one_message_per_group(self):
        queue = self.make_queue(_message_group_key='cart')
        self.post(queue, cart('c1', 1), cart('c1', 2), cart('c2', 1),
                  {'ttl': 900, 'body': {'other': 'a'}},
                  {'ttl': 900, 'body': {'other': 'b'}})
        self.assertEqual(
            [{'cart': 'c1', 'step': 1}, {'cart': 'c2', 'step': 1},
             {'other': 'a'}, {'other': 'b'}],
            self.claim_bodies(queue, limit=10))
        # c1's second message waits while its head is claimed.
        self.assertEqual([], self.claim(queue))

    @decorators.idempotent_id('988047a5-dc86-49e1-9767-a35dd549f0a6')
    def test_group_order_is_posting_order(self):
        queue = self.make_queue(_message_group_key='cart')
        self.post(queue, *[cart('c1', step) for step in range(4)])
        seen = []
        for _ in range(4):
            message, = self.claim(queue)
            seen.append(message['body']['step'])
            self.delete(message)
        self.assertEqual([0, 1, 2, 3], seen)
        self.assertEqual([], self.claim(queue))

    @decorators.idempotent_id('c7bd63b7-7fc6-4f68-9b04-90ecaba877ff')
    def test_released_head_is_handed_out_again_first(self):
        queue = self.make_queue(_message_group_key='cart')
        self.post(queue, cart('c1', 1), cart('c1', 2))
        href, claimed = self.client.claim(queue)
        self.assertEqual([{'cart': 'c1', 'step': 1}],
                         [m['body'] for m in claimed])
        self.release(href)
        self.assertEqual([{'cart': 'c1', 'step': 1}],
                         self.claim_bodies(queue))

    @decorators.idempotent_id('1af57373-8e6b-4898-b3e4-8ea14d752271')
    def test_string_and_integer_group_ids_differ(self):
        queue = self.make_queue(_message_group_key='cart')
        self.post(queue, cart('1', 'string'), cart(1, 'integer'))
        self.assertEqual(2, len(self.claim(queue)))

    @decorators.idempotent_id('03cf3ced-a9b8-49e8-a9d8-6d02caa69709')
    def test_stats_count_groups_and_groups_in_flight(self):
        queue = self.make_queue(_message_group_key='cart')
        self.post(queue, cart('c1', 1), cart('c1', 2), cart('c2', 1),
                  cart('c3', 1))
        stats = self.stats(queue)
        self.assertEqual((3, 0), (stats['groups'],
                                  stats['groups_in_flight']))
        self.claim(queue, limit=2)
        stats = self.stats(queue)
        self.assertEqual((3, 2, 2), (stats['groups'],
                                     stats['groups_in_flight'],
                                     stats['claimed']))

    @decorators.idempotent_id('92bd4176-1064-45e0-b767-93b2dc4977e2')
    def test_a_delayed_head_holds_its_group(self):
        queue = self.make_queue(_message_group_key='cart',
                                _default_message_delay=600)
        self.post(queue, cart('c1', 1),
                  dict(cart('c1', 2), delay=0), dict(cart('c2', 1), delay=0))
        self.assertEqual([{'cart': 'c2', 'step': 1}],
                         self.claim_bodies(queue))
