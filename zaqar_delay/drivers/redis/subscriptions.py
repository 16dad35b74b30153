"""Notification subscriptions on Redis.

Per queue: ``Q:subs`` (zset id -> the second it was created in, read from
the id itself: the zset orders ties by member, so it lists ids in their
text order, which is how Zaqar's clients page through them; subscriptions
that earlier releases stored keep their uuid4 id and fractional creation
time, and still list in creation order), ``Q:subscribers`` (hash
subscriber URI -> id, for the duplicate check) and ``Q:s:<id>`` (hash: ``s``
source, ``u`` subscriber, ``t`` ttl, ``e`` expires (s), ``o`` options JSON,
``c`` confirmed 0/1), expiring with the subscription. A subscription is
created with a Lua-free ``HSETNX`` on the subscriber index, so two concurrent
creates of the same subscriber cannot both succeed.

A ``cursor:<consume_id>`` subscriber is a persistent consumer
(``zaqar_delay/consumers.py``): create registers it first (a malformed one
is refused before anything is stored), an update of the subscriber moves
it, delete forgets it, and get shows its state in ``options`` (not list:
Zaqar's notifier lists the subscriptions on every post). Its state lives as
long as the subscription (see ``consumer_live`` in lua/_common.lua),
expiry included.

Zaqar's notifier lists the subscriptions on every post, straight from this
controller: ``list`` gives it those of ``Q:notified`` (same scores as
``Q:subs``, every subscription but the consumers'), one script call per
page (lua/notified.lua), so a post costs the same with 10,000 consumers as
with none. Zaqar's REST API lists through the pipeline, where our
subscription stage (zaqar_delay/stages.py) asks for
``list(..., with_consumers=True)``: ``Q:subs``, consumers included, as before.
"""

import json
import time

import bson

from zaqar.storage import base as storage
from zaqar.storage import errors as storage_errors

from zaqar_delay import consumers
from zaqar_delay import rules
from zaqar_delay.drivers.redis import keys
from zaqar_delay.drivers.redis import wire

FIELDS = ('s', 'u', 't', 'e', 'o', 'c')
# Subscriptions filed into, or expired ones dropped from, Q:notified per
# script call at most (lua/notified.lua).
NOTIFIED_PER_CALL = 500


class SubscriptionController(storage.Subscription):

    def __init__(self, driver):
        super().__init__(driver)
        self._client = driver.connection
        self._guarded = driver.guarded

    def _load(self, queue, project, subscription_id):
        key = keys.subscription_key(queue, project, subscription_id)
        values = self._guarded(lambda: self._client.hmget(key, FIELDS))
        if values[0] is None:
            return None
        return _rendered(subscription_id, values)

    def list(self, queue, project=None, marker=None,
             limit=storage.DEFAULT_SUBSCRIPTIONS_PER_PAGE,
             with_consumers=False):
        """A page of the queue's subscriptions in id order: without the
        persistent consumers' (what Zaqar's notifier reaches), or with
        them (``with_consumers=True``: what Zaqar's REST API lists)."""
        if with_consumers:
            return self._every(queue, project, marker, limit)
        return self._notified(queue, project, marker, limit)

    def _notified(self, queue, project, marker, limit):
        reply = [0]
        while reply[0] == 0:
            reply = self.driver.run_script('notified', queue, project,
                                           marker or '', limit,
                                           NOTIFIED_PER_CALL)
        found = [_rendered(sid.decode(), values)
                 for sid, values in zip(reply[1::2], reply[2::2])]
        yield iter(found)
        yield found[-1]['id'] if found else None

    def _every(self, queue, project, marker, limit):
        index, _ = keys.subscription_keys(queue, project)
        start = 0
        if marker:
            # As Zaqar's own drivers: an unknown marker lists from the start.
            rank = self._guarded(lambda: self._client.zrank(index, marker))
            start = 0 if rank is None else rank + 1
        ids = self._guarded(lambda: self._client.zrange(
            index, start, start + limit - 1))
        found = [self._load(queue, project, sid.decode()) for sid in ids]
        found = [sub for sub in found if sub]
        yield iter(found)
        yield found[-1]['id'] if found else None

    def get(self, queue, subscription_id, project=None):
        found = self._load(queue, project, subscription_id)
        if found is None:
            raise storage_errors.SubscriptionDoesNotExist(subscription_id)
        return self._reported(queue, project, found)

    def _reported(self, queue, project, subscription):
        """A persistent consumer's report (cursor, lag, lost, idle) merged
        into its subscription's options."""
        if not subscription['subscriber'].startswith(consumers.PREFIX):
            return subscription
        consume_id = consumers.consume_id_of(subscription['subscriber'])
        report = self.driver.message_controller.consumer_report(
            queue, project, consume_id)
        if report is not None:
            subscription['options'] = dict(subscription['options'], **report)
        return subscription

    def create(self, queue, subscriber, ttl, options, project=None):
        # First: a malformed cursor: subscriber is refused with nothing
        # stored, and the consumer exists when its subscription appears.
        self.driver.message_controller.register_consumer(queue, project,
                                                         subscriber)
        index, subscribers = keys.subscription_keys(queue, project)
        existing = self.get_with_subscriber(queue, subscriber, project)
        if existing is not None:
            return None
        subscription_id = rules.new_subscription_id()
        if not self._take_subscriber(subscribers, subscriber,
                                     subscription_id):
            return None
        now = int(time.time())
        key = keys.subscription_key(queue, project, subscription_id)

        def write(pipe):
            pipe.hset(key, mapping={'s': queue, 'u': subscriber, 't': ttl,
                                    'e': now + ttl,
                                    'o': json.dumps(options), 'c': 0})
            pipe.expire(key, ttl)
            pipe.zadd(index, {subscription_id: _creation_second(
                subscription_id)})
            _file_notified(pipe, queue, project, subscription_id, subscriber,
                           _creation_second(subscription_id))

        self.driver.pipelined(write)
        self._subscribed(queue, project, subscriber, now + ttl)
        return subscription_id

    def _take_subscriber(self, subscribers, subscriber, subscription_id):
        """Map ``subscriber`` to ``subscription_id`` unless another
        subscription has it. A retry of an HSETNX whose reply was lost
        finds the field its first attempt set: its own id is no rival."""
        def take():
            if self._client.hsetnx(subscribers, subscriber, subscription_id):
                return True
            holder = self._client.hget(subscribers, subscriber)
            return holder is not None and wire.text(holder) == subscription_id

        return self._guarded(take)

    def _free_subscriber(self, queue, project, subscriber, subscription_id):
        """Free ``subscriber`` if ``subscription_id`` still holds it (not
        a subscription that took it since)."""
        self.driver.run_script('subscriber_free', queue, project, subscriber,
                               subscription_id)

    def _subscribed(self, queue, project, subscriber, expires):
        """A ``cursor:`` subscription was stored until ``expires`` (s):
        its consumer counts for read-by-all from now on."""
        consume_id = consumers.consume_id_of(subscriber)
        if consume_id is not None:
            self.driver.message_controller._consumer_subscribed(
                queue, project, consume_id, expires * 1000)

    def update(self, queue, subscription_id, project=None, **kwargs):
        current = self.get(queue, subscription_id, project)
        index, subscribers = keys.subscription_keys(queue, project)
        key = keys.subscription_key(queue, project, subscription_id)
        fields = {}
        new_subscriber = kwargs.get('subscriber')
        moved = new_subscriber and new_subscriber != current['subscriber']
        if moved:
            # As create: a malformed cursor: subscriber changes nothing.
            self.driver.message_controller.register_consumer(
                queue, project, new_subscriber)
            if not self._take_subscriber(subscribers, new_subscriber,
                                         subscription_id):
                raise storage_errors.SubscriptionAlreadyExists()
            self._free_subscriber(queue, project, current['subscriber'],
                                  subscription_id)
            fields['u'] = new_subscriber
            # Ids stored by earlier releases carry no creation time.
            score = self._guarded(lambda: self._client.zscore(
                index, subscription_id)) or 0
        if kwargs.get('options') is not None:
            fields['o'] = json.dumps(kwargs['options'])
        ttl = kwargs.get('ttl')
        if ttl is not None:
            fields.update(t=ttl, e=int(time.time()) + ttl)

        def write(pipe):
            if fields:
                pipe.hset(key, mapping=fields)
            if ttl is not None:
                pipe.expire(key, ttl)
            if moved:
                _file_notified(pipe, queue, project, subscription_id,
                               new_subscriber, score)

        self.driver.pipelined(write)
        if moved or ttl is not None:
            now = int(time.time())
            expires = (now + ttl if ttl is not None else
                       now - current['age'] + current['ttl'])
            self._subscribed(queue, project, fields.get(
                'u', current['subscriber']), expires)
        if moved:
            self.driver.message_controller.forget_consumer(
                queue, project, current['subscriber'])

    def exists(self, queue, subscription_id, project=None):
        return self._load(queue, project, subscription_id) is not None

    def delete(self, queue, subscription_id, project=None):
        found = self._load(queue, project, subscription_id)
        index, _ = keys.subscription_keys(queue, project)

        def remove(pipe):
            pipe.zrem(index, subscription_id)
            pipe.delete(keys.subscription_key(queue, project,
                                              subscription_id))
            # After the hash: notified.lua files only ids whose hash is
            # there, so it cannot file this one again.
            pipe.zrem(keys.notified_key(queue, project), subscription_id)

        self.driver.pipelined(remove)
        if found:
            self._free_subscriber(queue, project, found['subscriber'],
                                  subscription_id)
            self.driver.message_controller.forget_consumer(
                queue, project, found['subscriber'])

    def get_with_subscriber(self, queue, subscriber, project=None):
        index, subscribers = keys.subscription_keys(queue, project)
        sid = self._guarded(lambda: self._client.hget(subscribers,
                                                      subscriber))
        if sid is None:
            return None
        found = self._load(queue, project, sid.decode())
        if found is None:
            # The subscription expired; free its subscriber URI.
            self._free_subscriber(queue, project, subscriber, sid.decode())
            self._guarded(lambda: self._client.zrem(index, sid))
            self._guarded(lambda: self._client.zrem(
                keys.notified_key(queue, project), sid))
        return found

    def confirm(self, queue, subscription_id, project=None, confirmed=True):
        self.get(queue, subscription_id, project)
        key = keys.subscription_key(queue, project, subscription_id)
        self._guarded(lambda: self._client.hset(key, 'c', int(confirmed)))


def _file_notified(pipe, queue, project, subscription_id, subscriber,
                   score):
    """Queue on ``pipe`` the filing of a subscription under Q:notified at
    ``score`` (its score in Q:subs) when Zaqar's notifier is to reach its
    ``subscriber`` (not a persistent consumer), its removal otherwise."""
    notified = keys.notified_key(queue, project)
    if subscriber.startswith(consumers.PREFIX):
        pipe.zrem(notified, subscription_id)
    else:
        pipe.zadd(notified, {subscription_id: score})


def _creation_second(subscription_id):
    """The creation second an ObjectId id carries (rules.new_subscription_id):
    ids of one second sort by their text after it, as the zset orders ties."""
    return int(bson.ObjectId(subscription_id).generation_time.timestamp())


def _rendered(subscription_id, values):
    """A subscription from its hash's FIELDS."""
    source, subscriber, ttl, expires, options, confirmed = (
        v.decode() for v in values)
    now = int(time.time())
    return {'id': subscription_id, 'source': source,
            'subscriber': subscriber, 'ttl': int(ttl),
            'age': now - (int(expires) - int(ttl)),
            'options': json.loads(options),
            'confirmed': confirmed == '1'}
