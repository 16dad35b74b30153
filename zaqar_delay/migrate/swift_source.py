"""Zaqar's own Swift message store as a source, read in its object layout
(``zaqar.storage.swift.utils``: one ``zaqar_message:<queue>:<project>``
container per queue, one JSON object per message named by its uuid1 id)
with Zaqar's Swift driver's client; subscriptions and deletes go through
that driver's own controllers.

Order: Zaqar's driver lists a queue by object name, and a uuid1's text
starts with the low bits of its clock, so that order is not the posting
order. The source sorts a queue's names by the creation time in each
uuid1 (one listing of names, held in memory for the walk: about 93 bytes
per message of the largest queue) and pages through that snapshot, so the
target gets the queue oldest first. Claiming or releasing a message
rewrites its object (its Swift timestamp restarts, its delay field is
dropped, its expiry moves to the claim's end), so its age comes from its
id, its expiry from the object's ``X-Delete-At``.
"""

import concurrent.futures
import threading
import uuid

import swiftclient
from oslo_serialization import jsonutils
from zaqar.common import decorators
from zaqar.storage.swift import driver as zaqar_swift
from zaqar.storage.swift import utils as swift_utils

from zaqar_delay import errors
from zaqar_delay.drivers.swift import connection
from zaqar_delay.migrate import sources

# Names per container listing request (Swift's default maximum is 10000).
LISTING = 1000
# Message objects read (or deleted) at once: Swift has no bulk GET, and
# Zaqar's driver deletes one by one.
READERS = 8
# 100 ns intervals from 1582-10-15 (the uuid1 epoch) to 1970-01-01.
_UUID1_EPOCH = 0x01B21DD213814000


def created_ms_of(name):
    """The creation time a uuid1 message name carries, in epoch ms (None
    for a name that is no uuid1)."""
    try:
        parsed = uuid.UUID(name)
    except ValueError:
        return None
    if parsed.version != 1:
        return None
    return (parsed.time - _UUID1_EPOCH) // 10000


def _posting_order(name):
    """Sort key: a uuid1's whole time (100 ns ticks; within one ms its
    text does not follow it once the low 32 bits wrap), then the name;
    names that are no uuid1 (not written by Zaqar) go last."""
    if created_ms_of(name) is None:
        return (1, 0, name)
    return (0, uuid.UUID(name).time, name)


class TempauthClient:
    """Zaqar's Swift client wrapper, which speaks only Keystone, for a
    Swift with tempauth (``?auth=v1`` in the source URI): the same
    swiftclient calls, one connection per thread."""

    def __init__(self, endpoint):
        self._endpoint = endpoint
        self._local = threading.local()

    def __getattr__(self, name):
        client = getattr(self._local, 'client', None)
        if client is None:
            client = self._local.client = swiftclient.Connection(
                authurl=self._endpoint.auth_url, user=self._endpoint.user,
                key=self._endpoint.key, auth_version='1', retries=5)
        return getattr(client, name)


class TempauthDataDriver(zaqar_swift.DataDriver):
    """Zaqar's Swift driver with the tempauth client."""

    @decorators.lazy_property(write=False)
    def connection(self):
        return TempauthClient(connection.Endpoint(self.swift_conf.uri,
                                                  'keystone'))


def driver_class(uri):
    """Zaqar's Swift driver, or its tempauth variant for ``?auth=v1``."""
    try:
        endpoint = connection.Endpoint(uri, 'keystone')
    except ValueError as exc:
        raise errors.InvalidInput('source URI: {}'.format(exc))
    if endpoint.auth == 'v1':
        return TempauthDataDriver
    return zaqar_swift.DataDriver


class SwiftSource(sources.Source):
    """Pages are slices of the queue's names sorted by creation time
    (a snapshot taken when a walk starts, marker None); the marker is an
    index into it, which this command's own deletes do not shift."""

    def __init__(self, driver):
        super().__init__(driver)
        self._client = driver.connection
        self._readers = concurrent.futures.ThreadPoolExecutor(READERS)
        self._walk = (None, [])

    def count(self, queue, project):
        try:
            headers = self._client.head_container(
                swift_utils._message_container(queue, project))
        except swiftclient.ClientException as exc:
            if exc.http_status == 404:
                return 0
            raise
        return int(headers['x-container-object-count'])

    def page(self, queue, project, marker, limit):
        container = swift_utils._message_container(queue, project)
        if marker is None or self._walk[0] != container:
            self._walk = (container, self._sorted_names(container))
        start = marker or 0
        names = self._walk[1][start:start + limit]
        if not names:
            return [], None
        return list(self._readers.map(
            lambda name: self._read(container, name), names)), \
            start + len(names)

    def delete(self, queue, project, message_ids):
        """Zaqar's own delete of each (a 404 is no error), ``READERS`` at
        a time: its ``bulk_delete`` sends one request after the other."""
        list(self._readers.map(
            lambda message_id: self.messages._delete(queue, message_id,
                                                     project),
            message_ids))

    def _sorted_names(self, container):
        names, marker = [], ''
        while True:
            try:
                _, objects = self._client.get_container(
                    container, marker=marker, limit=LISTING)
            except swiftclient.ClientException as exc:
                if exc.http_status == 404:
                    return []
                raise
            if not objects:
                break
            names += [obj['name'] for obj in objects]
            marker = objects[-1]['name']
        return sorted(names, key=_posting_order)

    def _read(self, container, name):
        try:
            headers, content = self._client.get_object(container, name)
        except swiftclient.ClientException as exc:
            if exc.http_status != 404:
                raise
            # Expired (Swift hides it before its expirer removes it) or
            # deleted since the listing: counted as expired, not moved.
            return sources.expired_message(name)
        message = jsonutils.loads(content)
        created_ms = created_ms_of(name) or int(
            float(headers['x-timestamp']) * 1000)
        return sources.SourceMessage(
            id=name, body=message['body'], created_ms=created_ms,
            expires_ms=_expires_ms(headers, message, created_ms),
            due_ms=message.get('delay_expires', 0) * 1000 or created_ms,
            client_uuid=headers['x-object-meta-clientid'],
            checksum=message.get('checksum'))


def _expires_ms(headers, message, created_ms):
    """Swift's expiry of the object; Zaqar always sets one, but an object
    without it lives its body's ttl."""
    if 'x-delete-at' in headers:
        return int(headers['x-delete-at']) * 1000
    return created_ms + message['ttl'] * 1000
