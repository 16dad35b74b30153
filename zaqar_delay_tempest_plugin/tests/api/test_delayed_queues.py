"""Delayed queues: ``_default_message_delay``, ``delay``, listing, stats."""

from tempest.lib import decorators

from zaqar_delay_tempest_plugin.tests import base


class DelayedQueueTest(base.ZaqarDelayTest):

    @decorators.idempotent_id('b5901f4b-2f2d-4589-9e33-465373b9a72a')
    def test_delayed_messages_are_not_claimed_or_listed(self):
        queue = self.make_queue(_default_message_delay=600)
        self.post(queue, {'ttl': 900, 'body': {'n': 'default'}},
                  {'ttl': 900, 'body': {'n': 'now'}, 'delay': 0},
                  {'ttl': 900, 'body': {'n': 'later'}, 'delay': 300})
        self.assertEqual([{'n': 'now'}], self.bodies(queue))
        self.assertEqual([{'n': 'default'}, {'n': 'now'}, {'n': 'later'}],
                         self.bodies(queue, include_delayed='true'))
        self.assertEqual([{'n': 'now'}], self.claim_bodies(queue))
        self.assertEqual([], self.claim_bodies(queue))

    @decorators.idempotent_id('44d66c5a-3567-40fb-8d68-722fa1d32de9')
    def test_stats_count_delayed_messages(self):
        queue = self.make_queue(_default_message_delay=600)
        self.post(queue, {'ttl': 900, 'body': {'n': 1}},
                  {'ttl': 900, 'body': {'n': 2}},
                  {'ttl': 900, 'body': {'n': 3}, 'delay': 0},
                  {'ttl': 900, 'body': {'n': 4}, 'delay': 0})
        self.claim(queue, limit=1)
        stats = self.stats(queue)
        self.assertEqual((4, 1, 1, 2), (stats['total'], stats['claimed'],
                                        stats['free'], stats['delayed']))

    @decorators.idempotent_id('ad7d0d0b-679c-49b4-a5af-de42634726c7')
    def test_message_delay_overrides_queue_default(self):
        queue = self.make_queue(_default_message_delay=600)
        self.post(queue, {'ttl': 900, 'body': {'n': 'default'}},
                  {'ttl': 900, 'body': {'n': 'soon'}, 'delay': 1})
        self.assertEqual([{'n': 'soon'}],
                         [m['body'] for m in self.claim_when_due(queue)])
        self.assertEqual(1, self.stats(queue)['delayed'])

    @decorators.idempotent_id('ae990fe5-0c3c-4eec-8dbd-ccc32e06ca22')
    def test_message_delay_has_no_effect_on_a_normal_queue(self):
        queue = self.make_queue()
        self.post(queue, {'ttl': 900, 'body': {'n': 1}, 'delay': 600})
        self.assertEqual([{'n': 1}], self.claim_bodies(queue))

    @decorators.idempotent_id('762066d2-004a-46a4-9843-4ade87cb822c')
    def test_the_bound_itself_is_accepted(self):
        queue = self.make_queue(_default_message_delay=self.max_delay)
        self.post(queue, {'ttl': 900, 'body': {'n': 1},
                          'delay': self.max_delay})
        self.assertEqual([], self.claim_bodies(queue))
        self.assertEqual(1, self.stats(queue)['delayed'])

    @decorators.idempotent_id('1ee951cb-7d18-4507-9c5b-efa685004881')
    def test_a_delayed_message_can_be_read_by_id(self):
        queue = self.make_queue(_default_message_delay=600)
        href, = self.post(queue, {'ttl': 900, 'body': {'n': 1}})
        _, message = self.client.show_single_message(
            self.client.relative(href))
        self.assertEqual({'n': 1}, message['body'])
        self.assertEqual([], self.claim(queue))
