"""Notification subscriptions on Swift.

Per queue, container ``zd:s:<project>:<queue>`` (names.py) holds
``s/<id>`` (JSON: source, subscriber, ttl, expires (s), options, confirmed)
and ``u/<subscriber>`` (the id; created with If-None-Match, so two creates
of one subscriber cannot both succeed). Both carry X-Delete-At, so Swift
forgets an expired subscription by itself. Ids are UUID-shaped but start
with the creation time, so a listing comes back in creation order.

A ``cursor:<consume_id>`` subscriber is a persistent consumer
(consumers.py): create registers it first (a malformed one is refused
before anything is stored), an update of the subscriber moves it, delete
forgets it, and get shows its state in ``options``. ``u/`` carries the
subscription's expiry in its Content-Type (``e``), so the consumers'
listing drops expired ones without a GET.

A consumer's subscription is stored as ``c/<id>`` instead of ``s/<id>``:
Zaqar's notifier lists the subscriptions on every post, straight from
this controller, and ``list`` gives it ``s/`` alone, so a post costs the
same whatever the number of consumers (those stored by earlier releases
stay under ``s/`` and are still listed to it, as before). Zaqar's REST
API lists through our subscription stage (zaqar_delay/stages.py), which
asks for ``with_consumers=True``: both prefixes, merged in id order.
"""

import itertools
import json
import os
import time
import uuid

from zaqar.storage import base as storage
from zaqar.storage import errors as storage_errors

from zaqar_delay import consumers
from zaqar_delay import errors
from zaqar_delay.drivers.swift import names

_COUNTER = itertools.count()
# How long a subscriber reserved by a create whose subscription is not
# stored yet stays taken: that create may still be running (its client
# timed out and sent it again), or it died, and the URI is free after.
CREATE_GRACE_S = 60


def _ordered_id():
    """A UUID whose hex sorts by creation (ms, then a process counter)."""
    value = (int(time.time() * 1000) << 80) | (
        (next(_COUNTER) % (1 << 24)) << 56) | int.from_bytes(
            os.urandom(7), 'big')
    return str(uuid.UUID(int=value))


class SubscriptionController(storage.Subscription):

    def __init__(self, driver):
        super().__init__(driver)
        self._store = driver.store

    def _c(self, queue, project):
        return names.container(names.SUBSCRIPTIONS, queue, project)

    def _load(self, container, subscription_id, consumer=None):
        """The live subscription, looked for under ``c/`` (``consumer``
        True), ``s/`` (False) or both at once (None: not known, or a
        consumer an earlier release may have stored under ``s/``). ``c/``
        wins: a consumer's writes go there, leaving an earlier release's
        ``s/`` copy to expire."""
        kinds = (True, False) if consumer is None else (consumer,)
        found = [data for data in self._store.parallel(
            lambda kind: self._store.get_json(
                container, names.subscription_obj(subscription_id, kind)),
            kinds) if data is not None]
        if not found:
            return None
        data = found[0][1]
        now = int(time.time())
        if data['e'] <= now:
            return None
        return {'id': subscription_id, 'source': data['s'],
                'subscriber': data['u'], 'ttl': data['t'],
                'age': max(0, now - (data['e'] - data['t'])),
                'options': data['o'], 'confirmed': data['c']}

    def _write(self, container, subscription, expires=None):
        if expires is None:
            expires = int(time.time()) + subscription['ttl']
        data = {'s': subscription['source'], 'u': subscription['subscriber'],
                't': subscription['ttl'], 'e': expires,
                'o': subscription['options'],
                'c': subscription['confirmed']}
        self._store.put(container,
                        names.subscription_obj(
                            subscription['id'],
                            _is_consumer(subscription['subscriber'])),
                        json.dumps(data).encode(),
                        content_type='application/json',
                        headers={'X-Delete-At': str(expires + 1)},
                        recreate=True)

    def _reserve(self, container, subscriber, subscription_id, ttl):
        """Take a subscriber URI for ``subscription_id``; False if taken by
        a live subscription."""
        name = names.subscriber_obj(subscriber)
        expires = int(time.time()) + ttl
        headers = {'X-Delete-At': str(expires + 1)}
        for _ in range(2):
            if self._store.create(container, name, subscription_id.encode(),
                                  content_type=names.content_type(e=expires),
                                  headers=headers, recreate=True):
                return True
            found = self._store.get(container, name)
            holder = None if found is None else found[1].decode()
            if holder == subscription_id:
                # Ours: this is the retry of a call cut short after it.
                return True
            if holder is not None and self._load(container,
                                                 holder) is not None:
                return False
            if holder is not None and _being_created(holder):
                # Zaqar reads a subscription back when create answers
                # "taken"; there is none yet: try again later.
                raise errors.BackendUnavailable(
                    backend='Swift', reason='subscriber {} is being '
                    'subscribed by another call'.format(subscriber))
            # The holder is gone (expired or half-deleted): free the URI.
            self._store.delete(container, name)
        return False

    def list(self, queue, project=None, marker=None,
             limit=storage.DEFAULT_SUBSCRIPTIONS_PER_PAGE,
             with_consumers=False):
        """A page of the queue's subscriptions in id order: ``s/`` alone
        (what Zaqar's notifier reaches), or with the consumers' ``c/``
        (``with_consumers=True``: what Zaqar's REST API lists)."""
        container = self._c(queue, project)
        prefixes = ('s/', 'c/') if with_consumers else ('s/',)
        # One prefix after the other, so that each page's GETs run in
        # parallel (nested parallel calls run in line).
        merged = {sub['id']: sub for prefix in prefixes
                  for sub in self._page(container, prefix, marker, limit)}
        out = [merged[sid] for sid in sorted(merged)][:limit]
        yield iter(out)
        yield out[-1]['id'] if out else None

    def _page(self, container, prefix, marker, limit):
        """Up to ``limit`` live subscriptions under ``prefix`` after
        ``marker``, in id order."""
        out = []
        after = prefix + names.enc(marker) if marker else None
        while len(out) < limit:
            page = self._store.listing(container, prefix, marker=after,
                                       limit=limit)
            if not page:
                break
            after = page[-1]['name']
            ids = [names.parse_subscription(e['name']) for e in page]
            found = self._store.parallel(
                lambda sid: self._load(container, sid, prefix == 'c/'), ids)
            out += [sub for sub in found if sub][:limit - len(out)]
            if len(page) < limit:
                break
        return out

    def get(self, queue, subscription_id, project=None):
        found = self._load(self._c(queue, project), subscription_id)
        if found is None:
            raise storage_errors.SubscriptionDoesNotExist(subscription_id)
        return self._reported(queue, project, found)

    def _reported(self, queue, project, subscription):
        """A persistent consumer's report (cursor, lag, lost, idle) merged
        into its subscription's options (get only: Zaqar's notifier lists
        the subscriptions on every post)."""
        consume_id = consumers.consume_id_of(subscription['subscriber'])
        if consume_id is None:
            return subscription
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
        container = self._c(queue, project)
        subscription_id = _ordered_id()
        if not self._reserve(container, subscriber, subscription_id, ttl):
            return None
        try:
            self._write(container, {
                'id': subscription_id, 'source': queue,
                'subscriber': subscriber, 'ttl': ttl, 'options': options,
                'confirmed': False})
        except errors.BackendUnavailable:
            # The subscriber goes back, so the client's retry is not held
            # up by the reservation of a create that is over.
            self._free(container, subscriber, subscription_id)
            raise
        return subscription_id

    def _free(self, container, subscriber, subscription_id):
        """Delete ``subscriber``'s reservation if it names
        ``subscription_id``; a failure is left to CREATE_GRACE_S."""
        name = names.subscriber_obj(subscriber)
        try:
            found = self._store.get(container, name)
            if found is not None and found[1].decode() == subscription_id:
                self._store.delete(container, name)
        except errors.BackendUnavailable:
            pass

    def update(self, queue, subscription_id, project=None, **kwargs):
        container = self._c(queue, project)
        current = self._load(container, subscription_id)
        if current is None:
            raise storage_errors.SubscriptionDoesNotExist(subscription_id)
        new_subscriber = kwargs.get('subscriber')
        ttl = kwargs.get('ttl') or current['ttl']
        old_subscriber = current['subscriber']
        moved = new_subscriber and new_subscriber != old_subscriber
        if moved:
            # As create: a malformed cursor: subscriber changes nothing.
            self.driver.message_controller.register_consumer(
                queue, project, new_subscriber)
            if not self._reserve(container, new_subscriber, subscription_id,
                                 ttl):
                raise storage_errors.SubscriptionAlreadyExists()
            self._store.delete(container,
                               names.subscriber_obj(current['subscriber']))
            # Before the subscription names the new subscriber: a retry of
            # an update cut short after that would not know the old one.
            self.driver.message_controller.forget_consumer(
                queue, project, old_subscriber)
            current['subscriber'] = new_subscriber
        elif kwargs.get('ttl'):
            expires = int(time.time()) + ttl
            self._store.put(container,
                            names.subscriber_obj(current['subscriber']),
                            subscription_id.encode(),
                            content_type=names.content_type(e=expires),
                            headers={'X-Delete-At': str(expires + 1)},
                            recreate=True)
        if kwargs.get('options') is not None:
            current['options'] = kwargs['options']
        expires = None if kwargs.get('ttl') else _expires(current)
        current['ttl'] = ttl
        self._write(container, current, expires)
        if moved and _is_consumer(old_subscriber) != _is_consumer(
                new_subscriber):
            # Written under its new prefix first: never missing meanwhile.
            self._store.delete(container, names.subscription_obj(
                subscription_id, _is_consumer(old_subscriber)))

    def exists(self, queue, subscription_id, project=None):
        return self._load(self._c(queue, project),
                          subscription_id) is not None

    def delete(self, queue, subscription_id, project=None):
        container = self._c(queue, project)
        found = self._load(container, subscription_id)
        doomed = [names.subscription_obj(subscription_id, kind)
                  for kind in (False, True)]
        if found:
            # Before the subscription goes: a retry of a delete cut short
            # after it would find no subscriber to forget.
            self.driver.message_controller.forget_consumer(
                queue, project, found['subscriber'])
            doomed.insert(0, names.subscriber_obj(found['subscriber']))
        self._store.delete_many(container, doomed)

    def get_with_subscriber(self, queue, subscriber, project=None):
        container = self._c(queue, project)
        found = self._store.get(container, names.subscriber_obj(subscriber))
        if found is None:
            return None
        # A consumer: maybe stored under s/ by an earlier release.
        return self._load(container, found[1].decode(),
                          None if _is_consumer(subscriber) else False)

    def confirm(self, queue, subscription_id, project=None, confirmed=True):
        container = self._c(queue, project)
        current = self._load(container, subscription_id)
        if current is None:
            raise storage_errors.SubscriptionDoesNotExist(subscription_id)
        current['confirmed'] = bool(confirmed)
        self._write(container, current, _expires(current))


def _being_created(subscription_id):
    """True for an id (_ordered_id) made less than CREATE_GRACE_S ago: a
    create that reserved its subscriber and has not stored its
    subscription yet, not a dead one."""
    try:
        made_ms = uuid.UUID(subscription_id).int >> 80
    except ValueError:
        return False
    return time.time() * 1000 - made_ms < CREATE_GRACE_S * 1000


def _is_consumer(subscriber):
    return subscriber.startswith(consumers.PREFIX)


def _expires(subscription):
    return int(time.time()) + subscription['ttl'] - subscription['age']
