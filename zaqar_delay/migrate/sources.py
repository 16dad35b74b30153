"""The old message store, read through Zaqar's own driver classes
(Swift's in ``swift_source``).

Every source answers the same four questions per queue: how many messages
(``count``), the next page after a marker (``page``), delete these ids
(``delete``), and its subscriptions (``subscriptions``). A page carries
each message as a :class:`SourceMessage`, with the times Zaqar's driver
stored (created, expires, due), so nothing is lost to the rounding of the
``age`` its API shows.

Live claims are not carried: the moved message is free (claim count 0)
in the target, and the consumer that held the claim gets a "claim not
found" on its next delete or update (docs/migration.md).
"""

import dataclasses
import datetime
import math
from urllib import parse

import bson
from zaqar.storage.mongodb import utils as mongo_utils
from zaqar.storage.redis import models as redis_models
from zaqar.storage.redis import subscriptions as redis_subscriptions
from zaqar.storage.redis import utils as redis_utils

from zaqar_delay import errors

KINDS = ('redis', 'mongodb', 'swift')
# Subscriptions read per request.
SUBSCRIPTIONS_PAGE = 100


@dataclasses.dataclass
class SourceMessage:
    """One message as the old store holds it; times in epoch ms."""

    id: str
    body: object
    created_ms: int
    expires_ms: int
    due_ms: int
    client_uuid: str
    checksum: str = None

    def ttl_s(self):
        """The ttl counted from created (a claim may have grown it)."""
        return math.ceil((self.expires_ms - self.created_ms) / 1000)

    def delay_s(self):
        return max(0, math.ceil((self.due_ms - self.created_ms) / 1000))


def kind_of(uri):
    """The source driver a URI names (its scheme), or a clear error."""
    scheme = parse.urlparse(uri).scheme
    if scheme not in KINDS:
        raise errors.InvalidInput(
            'source URI {!r}: the scheme must be one of {} (Zaqar\'s own '
            'message store drivers this command reads)'.format(
                uri, ', '.join(KINDS)))
    return scheme


def check_uri(uri):
    """What can be checked of a source URI before anything moves: its
    scheme and, for Swift, its form and auth mode (parsed when the
    driver is chosen)."""
    if kind_of(uri) == 'swift':
        from zaqar_delay.migrate import swift_source
        swift_source.driver_class(uri)


def open_source(conf, uri, control_driver):
    """Zaqar's own data driver for ``uri`` (its ``[drivers:message_store:
    <kind>]`` options taken from ``conf``, the URI overriding theirs),
    wrapped as a source."""
    kind = kind_of(uri)
    if kind == 'redis':
        from zaqar.storage.redis import driver
        driver_class, wrapper = driver.DataDriver, RedisSource
    elif kind == 'mongodb':
        from zaqar.storage.mongodb import driver
        driver_class, wrapper = driver.DataDriver, MongoSource
    else:
        from zaqar_delay.migrate import swift_source
        driver_class = swift_source.driver_class(uri)
        wrapper = swift_source.SwiftSource
    for group, options in driver_class._DRIVER_OPTIONS:
        conf.register_opts(options, group=group)
    conf.set_override('uri', uri, group='drivers:message_store:' + kind)
    return wrapper(driver_class(conf, None, control_driver))


class Source:
    """What every source shares: Zaqar's subscription and delete API."""

    def __init__(self, driver):
        self.driver = driver
        self.messages = driver.message_controller

    def delete(self, queue, project, message_ids):
        """Delete ``message_ids``, claimed or not."""
        if message_ids:
            self.messages.bulk_delete(queue, message_ids, project=project)

    def after_delete(self, marker, deleted):
        """The marker of the next page once ``deleted`` messages of the
        page ending at ``marker`` are gone."""
        return marker

    def subscriptions(self, queue, project):
        """Every subscription of the queue, as Zaqar lists them. A page
        can come back short with more to follow (Zaqar's drivers leave
        out a subscription that expired and is still indexed), so only a
        page that moves the marker no further ends the walk."""
        marker = None
        while True:
            page, after = self._subscription_page(queue, project, marker)
            yield from page
            if not after or after == marker:
                return
            marker = after

    def _subscription_page(self, queue, project, marker):
        pages = self.driver.subscription_controller.list(
            queue, project=project, marker=marker,
            limit=SUBSCRIPTIONS_PAGE)
        return list(next(pages)), next(pages)


class RedisSource(Source):
    """Zaqar's Redis store, paged by rank in the queue's message set and
    read with Zaqar's own message model. Not through its ``list()``: that
    raises KeyError on a page whose messages have all expired (not yet
    collected), and after a marker at rank 0 starts over at the head, so
    it could neither be resumed after deletes nor trusted to end. The
    marker is a rank; the API is stopped, so ranks only shift by this
    command's own deletes (after_delete)."""

    def count(self, queue, project):
        return self.messages._client.zcard(
            redis_utils.msgset_key(queue, project))

    def page(self, queue, project, marker, limit):
        """(messages, next marker); the marker is None at the end."""
        client = self.messages._client
        start = marker or 0
        ids = client.zrange(redis_utils.msgset_key(queue, project), start,
                            start + limit - 1)
        if not ids:
            return [], None
        found = redis_models.Message.from_redis_bulk(ids, client)
        # A message Redis expired keeps its id in the set until Zaqar's
        # gc: counted as expired, not moved.
        return [expired_message(mid.decode()) if m is None
                else _from_redis(m) for mid, m in zip(ids, found)], \
            start + len(ids)

    def delete(self, queue, project, message_ids):
        """Zaqar's bulk delete leaves in the set the id of a message that
        expired since it was verified: it goes too, so each id deleted
        moves the ranks after it by one (after_delete)."""
        super().delete(queue, project, message_ids)
        if message_ids:
            self.messages._client.zrem(
                redis_utils.msgset_key(queue, project), *message_ids)

    def after_delete(self, marker, deleted):
        return marker - deleted

    def _subscription_page(self, queue, project, marker):
        """Zaqar's page after the id ``marker`` names, with the id it
        read last as the next marker: its own next marker is the last
        subscription it returned, none when all it read had expired."""
        key = redis_utils.scope_subscription_ids_set(
            queue, project, redis_subscriptions.SUBSCRIPTION_IDS_SUFFIX)
        client = self.driver.subscription_controller._client
        start = 0 if marker is None else client.zrank(key, marker)
        if start is None:
            return [], None
        if marker is not None:
            start += 1
        read = client.zrange(key, start, start + SUBSCRIPTIONS_PAGE - 1)
        if not read:
            return [], None
        page, _ = super()._subscription_page(queue, project, marker)
        return page, read[-1].decode()


def expired_message(message_id):
    """What a source reads for a message it no longer holds."""
    return SourceMessage(id=message_id, body=None, created_ms=0,
                         expires_ms=0, due_ms=0, client_uuid=None)


def _from_redis(message):
    return SourceMessage(
        id=message.id, body=message.body,
        created_ms=message.created * 1000,
        expires_ms=message.expires * 1000,
        due_ms=(message.delay_expires or message.created) * 1000,
        client_uuid=message.client_uuid, checksum=message.checksum)


class MongoSource(Source):
    """Zaqar's MongoDB store, paged by its per-queue marker ``k`` through
    its message controller's own ``_list`` (claimed and delayed included;
    expired ones it leaves out).

    ``k`` is not unique in a queue: Zaqar's driver dead-letters a message
    by changing its queue, and the message keeps the ``k`` its own queue
    gave it, so a dead-letter queue fed by several queues holds messages
    with the same ``k``. A marker is therefore (``k``, the ids of that
    ``k`` read so far), and a page lists from ``k`` itself: messages of
    one ``k`` on either side of a page's end are all read."""

    def count(self, queue, project):
        return self.messages._count(queue, project, include_claimed=True)

    def page(self, queue, project, marker, limit):
        last_k, seen = marker if marker is not None else (None, ())
        # Every message of ``last_k`` sorts first: the ones read already
        # are among them, so the page still holds ``limit`` new ones.
        docs = [doc for doc in self.messages._list(
            queue, project=project,
            marker=None if last_k is None else last_k - 1, echo=True,
            include_claimed=True, include_delayed=True,
            limit=limit + len(seen))
            if str(doc['_id']) not in seen][:limit]
        if not docs:
            return [], None
        end = docs[-1]['k']
        read_at_end = {str(doc['_id']) for doc in docs if doc['k'] == end}
        if end == last_k:
            read_at_end |= set(seen)
        return [_from_mongo(doc) for doc in docs], (end, frozenset(
            read_at_end))


def _from_mongo(doc):
    created_ms = int(mongo_utils.oid_ts(doc['_id']) * 1000)
    expires = doc['e']
    return SourceMessage(
        id=str(doc['_id']), body=doc['b'], created_ms=created_ms,
        expires_ms=int(expires.replace(
            tzinfo=expires.tzinfo or datetime.timezone.utc
        ).timestamp() * 1000),
        due_ms=int(doc.get('d', 0) * 1000) or created_ms,
        client_uuid=_poster(doc['u']), checksum=doc.get('cs'))


def _poster(stored):
    # Zaqar stores the poster's UUID as BSON binary (subtype 4), which its
    # client decodes as Binary: str() of that is the raw bytes' repr.
    if isinstance(stored, bson.binary.Binary):
        return str(stored.as_uuid())
    return str(stored)

