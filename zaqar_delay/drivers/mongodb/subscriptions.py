"""Notification subscriptions on MongoDB (collection ``subscriptions``).

One document per subscription (fields in fields.py). A unique index on
``{p, s, u}`` makes "one subscription per subscriber URI and queue" hold
under concurrent creates; an expired subscription is removed before a new
one takes its URI. Reads filter on ``e``, so the TTL monitor's lag (up to a
minute) is never visible. Options are stored as JSON text, so ``$`` or
dotted keys in them are data.
"""

import contextlib
import json

import bson
from pymongo import errors as mongo_errors
from zaqar.storage import base as storage
from zaqar.storage import errors as storage_errors

from zaqar_delay import consumers
from zaqar_delay import rules
from zaqar_delay.drivers.mongodb import clock
from zaqar_delay.drivers.mongodb import consumers as consumer_state


class SubscriptionController(storage.Subscription):

    def __init__(self, driver):
        super().__init__(driver)
        self._subs = driver.subscriptions

    def _where(self, queue, project, **more):
        query = {'p': project, 's': queue}
        query.update(more)
        return query

    def _live(self, queue, project, now, **more):
        return self._where(queue, project, e={'$gt': now}, **more)

    @staticmethod
    def _render(doc, now):
        return {'id': doc['_id'], 'source': doc['s'],
                'subscriber': doc['u'], 'ttl': doc['t'],
                'age': max(0, (now - (doc['e'] - doc['t'] * 1000)) // 1000),
                'options': json.loads(doc['o']),
                'confirmed': bool(doc['c'])}

    def _find_one(self, queue, project, now, **more):
        doc = self._subs.find_one(self._live(queue, project, now, **more))
        return None if doc is None else self._render(doc, now)

    def list(self, queue, project=None, marker=None,
             limit=storage.DEFAULT_SUBSCRIPTIONS_PER_PAGE,
             with_consumers=False):
        """A page of the queue's subscriptions in id order: without the
        persistent consumers' (what Zaqar's notifier, which lists them on
        every post, reaches: index ``zd_sub_notified`` skips consumers
        without reading them), or with them (``with_consumers=True``:
        what Zaqar's REST API lists, through our subscription stage)."""
        now = self.driver.now()
        query = self._live(queue, project, now)
        index = 'zd_sub_order'
        if not with_consumers:
            # Consumers stored before the mark are listed, as before.
            query[consumer_state.MARK] = None
            index = 'zd_sub_notified'
        if marker:
            after = self._subs.find_one(
                self._where(queue, project, _id=str(marker)), {'k': True})
            if after is not None:
                query['k'] = {'$gt': after['k']}
            elif bson.ObjectId.is_valid(str(marker)):
                # Deleted since it was handed out: an id we made is its
                # own place in the order, so the next page goes on from
                # there, as on Zaqar's MongoDB driver, instead of
                # listing from the start again (Zaqar's notifier would
                # notify the first page twice).
                query['k'] = {'$gt': bson.ObjectId(str(marker))}
        docs = self._subs.find(query, None, [('k', 1)], limit, index)
        found = [self._render(doc, now) for doc in docs]
        yield iter(found)
        yield found[-1]['id'] if found else None

    def get(self, queue, subscription_id, project=None):
        found = self._find_one(queue, project, self.driver.now(),
                               _id=str(subscription_id))
        if found is None:
            raise storage_errors.SubscriptionDoesNotExist(subscription_id)
        # A persistent consumer's state shows in its options (get only:
        # the lag is a count).
        consume_id = consumers.consume_id_of(found['subscriber'])
        if consume_id is not None:
            report = self.driver.message_controller.consumer_report(
                queue, project, consume_id)
            if report is not None:
                found['options'] = dict(found['options'], **report)
        return found

    def create(self, queue, subscriber, ttl, options, project=None):
        # First: a malformed cursor: subscriber is refused, nothing stored.
        self.driver.message_controller.register_consumer(queue, project,
                                                         subscriber)
        now = self.driver.now()
        # An expired subscription frees its subscriber URI at once.
        self._subs.delete_many(self._where(queue, project, u=subscriber,
                                           e={'$lte': now}))
        # The order key is the id itself: Zaqar's clients page through
        # subscriptions in id order (rules.new_subscription_id).
        subscription_id = rules.new_subscription_id()
        doc = self._where(queue, project, _id=subscription_id, u=subscriber,
                          o=json.dumps(options), c=False,
                          k=bson.ObjectId(subscription_id))
        doc.update(_expiry(now, ttl))
        # An expired subscription's consumer state went with it above.
        doc.update(consumer_state.fresh(subscriber, now))
        try:
            with self._consumer_appearing(queue, project, subscriber):
                self._subs.insert_one(doc)
        except mongo_errors.DuplicateKeyError:
            return None
        return subscription_id

    @contextlib.contextmanager
    def _consumer_appearing(self, queue, project, subscriber):
        """Around a write that may make ``subscriber`` a persistent
        consumer of the queue: its metadata copy, which says whether the
        queue has one (metadata.MongoCopies), is forgotten before and
        after, as a metadata change forgets it."""
        copies = self.driver.metadata_copies
        if copies is None or not (isinstance(subscriber, str) and
                                  subscriber.startswith(consumers.PREFIX)):
            yield
            return
        copies.forget(queue, project)
        try:
            yield
        finally:
            copies.forget(queue, project)

    def update(self, queue, subscription_id, project=None, **kwargs):
        now = self.driver.now()
        current = self.get(queue, subscription_id, project)
        changes, reset = {}, {}
        subscriber = kwargs.get('subscriber')
        if subscriber and subscriber != current['subscriber']:
            # As create: a malformed cursor: subscriber changes nothing.
            self.driver.message_controller.register_consumer(
                queue, project, subscriber)
            self._subs.delete_many(self._where(
                queue, project, u=subscriber, e={'$lte': now}))
            changes['u'] = subscriber
            # The new consumer starts afresh; the old one's state goes.
            changes.update(consumer_state.fresh(subscriber, now))
            reset = {field: '' for field in consumer_state.FIELDS
                     if field not in changes}
        if kwargs.get('options') is not None:
            changes['o'] = json.dumps(kwargs['options'])
        if kwargs.get('ttl') is not None:
            changes.update(_expiry(now, kwargs['ttl']))
        if not changes:
            return
        try:
            with self._consumer_appearing(queue, project,
                                          changes.get('u')):
                self._subs.update_one(
                    self._where(queue, project, _id=str(subscription_id)),
                    dict({'$set': changes}, **({'$unset': reset} if reset
                                               else {})))
        except mongo_errors.DuplicateKeyError:
            raise storage_errors.SubscriptionAlreadyExists()

    def exists(self, queue, subscription_id, project=None):
        return self._find_one(queue, project, self.driver.now(),
                              _id=str(subscription_id)) is not None

    def delete(self, queue, subscription_id, project=None):
        self._subs.delete_one(self._where(queue, project,
                                          _id=str(subscription_id)))

    def get_with_subscriber(self, queue, subscriber, project=None):
        return self._find_one(queue, project, self.driver.now(),
                              u=subscriber)

    def confirm(self, queue, subscription_id, project=None, confirmed=True):
        self.get(queue, subscription_id, project)
        self._subs.update_one(
            self._where(queue, project, _id=str(subscription_id)),
            {'$set': {'c': bool(confirmed)}})


def _expiry(now, ttl):
    """``t``, ``e`` (epoch ms) and ``x`` (the date the TTL index reads)."""
    expires = now + ttl * 1000
    return {'t': ttl, 'e': expires, 'x': clock.as_date(expires)}
