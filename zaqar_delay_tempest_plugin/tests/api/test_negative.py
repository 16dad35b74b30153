"""The 400s of bad delays, queue attributes at PUT, retention, group ids
and cursor subscribers (docs/testing.md names where the other documented
400s are tested): the request is refused with a description naming the
field, and nothing of it is stored. An unknown marker lists an empty
page."""

from tempest.lib.common.utils import data_utils
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from zaqar_delay_tempest_plugin.tests import base


class NegativeTest(base.ZaqarDelayTest):

    def assert_refused(self, field, call, *args, **kwargs):
        error = self.assertRaises(lib_exc.BadRequest, call, *args, **kwargs)
        # Zaqar's own transport checks some values first and writes
        # "Delay"; ours write the field as it is spelled in the request.
        self.assertIn(field.lower(),
                      error.resp_body['description'].lower())
        return error

    def assert_post_refused(self, queue, field, *messages):
        self.assert_refused(field, self.client.post_messages, queue,
                            {'messages': list(messages)})
        self.assertEqual([], self.bodies(queue, include_delayed='true'))
        self.assertEqual(0, self.stats(queue)['total'])

    @decorators.idempotent_id('f31b2c28-7546-4a57-a6ec-92a415143cc6')
    @decorators.attr(type=['negative'])
    def test_message_delay_out_of_range(self):
        queue = self.make_queue(_default_message_delay=60)
        for bad in (-1, self.max_delay + 1):
            error = self.assert_refused(
                'delay', self.client.post_messages, queue, {'messages': [
                    {'ttl': 900, 'body': {'n': 'good'}, 'delay': 0},
                    {'ttl': 900, 'body': {'n': 'bad'}, 'delay': bad}]})
            # Zaqar's transport refuses these before our drivers see them;
            # its description names the field and the bound, not the value.
            self.assertIn(str(self.max_delay),
                          error.resp_body['description'])
        self.assertEqual([], self.bodies(queue, include_delayed='true'))
        self.assertEqual(0, self.stats(queue)['total'])

    @decorators.idempotent_id('cd6d9e96-c73e-4e6b-a0dd-f65d66a9a08c')
    @decorators.attr(type=['negative'])
    def test_message_delay_not_an_integer(self):
        queue = self.make_queue(_default_message_delay=60)
        for bad in (True, 1.5, '5', None):
            self.assert_post_refused(
                queue, 'delay',
                {'ttl': 900, 'body': {'n': 'good'}, 'delay': 0},
                {'ttl': 900, 'body': {'n': 'bad'}, 'delay': bad})

    @decorators.idempotent_id('f8d15ead-75a8-496e-8bbb-e92fbf52c652')
    @decorators.attr(type=['negative'])
    def test_queue_default_delay_refused_at_put(self):
        name = data_utils.rand_name('zd-refused')
        for bad in (-1, self.max_delay + 1):
            # Zaqar's own check, before our drivers: it names the bound.
            self.assert_refused(str(self.max_delay),
                                self.client.create_queue_with_metadata,
                                name, {'_default_message_delay': bad})
        for bad in (1.5, '5'):
            self.assert_refused('_default_message_delay',
                                self.client.create_queue_with_metadata,
                                name, {'_default_message_delay': bad})

    @decorators.idempotent_id('505c815b-4e8c-4a76-bc27-643f6d7eb1e4')
    @decorators.attr(type=['negative'])
    def test_invalid_queue_attributes_refused_at_put(self):
        # Zaqar lets these through; our drivers refuse them when they are
        # set, so a queue can never be left refusing every post and claim.
        name = data_utils.rand_name('zd-refused')
        for attribute, bad in (('_default_message_delay', True),
                               ('_redelivery_delay', -1),
                               ('_redelivery_delay', True),
                               ('_redelivery_delay', self.max_delay + 1),
                               ('_max_claim_count', 0),
                               ('_dead_letter_queue', ''),
                               ('_dead_letter_queue', name),
                               ('_message_group_key', 5)):
            self.assert_refused(attribute,
                                self.client.create_queue_with_metadata,
                                name, {attribute: bad})
        self.assert_refused('_enable_encrypt_messages',
                            self.client.create_queue_with_metadata, name,
                            {'_message_group_key': 'cart',
                             '_enable_encrypt_messages': True})

    @decorators.idempotent_id('3c0f7d2e-9a41-4b8e-b6d5-17e2f4a9c081')
    @decorators.attr(type=['negative'])
    def test_malformed_retention_refused_at_put(self):
        # A tenant's _retention may only tighten what the operator set;
        # these are malformed under any operator settings.
        name = data_utils.rand_name('zd-refused')
        for bad, named in (('x', "'x'"), ({'time': -1}, '-1'),
                           ({'length': 1.5}, '1.5'),
                           ({'policy': 'sometimes'}, "'sometimes'"),
                           ({'bogus': 1}, "'bogus'")):
            error = self.assert_refused(
                '_retention', self.client.create_queue_with_metadata,
                name, {'_retention': bad})
            self.assertIn(named, error.resp_body['description'])

    @decorators.idempotent_id('9d84e0a3-5c6b-4f17-8e2a-c41b7d093f6e')
    @decorators.attr(type=['negative'])
    def test_cursor_subscriber_that_is_not_a_client_id(self):
        # Needs "cursor" in the cloud's [transport] subscriber_types (the
        # devstack plugin adds it), else Zaqar refuses the scheme itself.
        queue = self.make_queue()
        for bad in ('cursor:NOT-A-UUID',
                    'cursor:2F3B0C4A-6D1E-4A8B-9C7D-0E1F2A3B4C5D'):
            error = self.assert_refused(
                'subscriber', self.client.create_subscription, queue,
                {'subscriber': bad, 'ttl': 3600})
            self.assertIn('consume_id', error.resp_body['description'])
        _, body = self.client.list_subscription(queue)
        self.assertEqual([], body['subscriptions'])

    @decorators.idempotent_id('e9fa9edd-63a0-4219-a908-34f608f84bc7')
    @decorators.attr(type=['negative'])
    def test_group_id_neither_string_nor_integer(self):
        queue = self.make_queue(_message_group_key='cart')
        for bad in (1.5, True, [1], {'a': 1}):
            self.assert_post_refused(
                queue, 'cart', {'ttl': 900, 'body': {'cart': 'ok'}},
                {'ttl': 900, 'body': {'cart': bad}})

    @decorators.idempotent_id('cf841c4b-2f60-44c9-b885-2e4cd986c449')
    @decorators.attr(type=['negative'])
    def test_group_id_too_long(self):
        queue = self.make_queue(_message_group_key='cart')
        self.assert_post_refused(queue, 'cart',
                                 {'ttl': 900, 'body': {'cart': 'x' * 300}})

    @decorators.idempotent_id('83b35057-6724-4490-891b-ae780857fce5')
    @decorators.attr(type=['negative'])
    def test_marker_that_is_not_a_position(self):
        # As with Zaqar's own drivers: an unknown marker lists an empty
        # page, and is never interpreted as anything else.
        queue = self.make_queue()
        self.post(queue, {'ttl': 900, 'body': {'n': 1}})
        for bad in ('abc', '-5', '{"$gt": ""}'):
            self.assertEqual([], self.bodies(queue, marker=bad))
