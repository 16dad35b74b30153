"""MongoDB client construction and the one place MongoDB faults are handled.

Every collection the controllers touch is a :class:`GuardedCollection`:
each call is translated at this edge, so a lost server becomes
``errors.BackendUnavailable``, a Zaqar ``ConnectionError`` (HTTP 503), and
never a stack trace. ``find`` returns a list, so a fault while iterating a
cursor is caught here too. Duplicate-key errors pass through: the
controllers use unique indexes on purpose.
"""

import functools

from oslo_log import log as logging
import pymongo
from pymongo import errors as mongo_errors

from zaqar_delay import errors

LOG = logging.getLogger(__name__)

SCHEMES = {'delay.mongodb': 'mongodb', 'delay.mongodb+srv': 'mongodb+srv',
           'mongodb': 'mongodb', 'mongodb+srv': 'mongodb+srv'}

# Raised as they are: callers handle them.
PASSED_THROUGH = (mongo_errors.DuplicateKeyError, mongo_errors.BulkWriteError)
# The code of a write error a unique index refused.
DUPLICATE_KEY = 11000
# Documents one delete_all request removes: what a tenant makes without
# bound (claims, pins, a group's members) goes in requests of this size.
DELETE_BATCH = 1000
# The oldest MongoDB the driver runs on: every post takes its positions
# with an update pipeline (reservations.py), which 4.2 introduced.
MIN_SERVER_VERSION = (4, 2)


def check_server(client):
    """Raise UnsupportedServer for a server older than MIN_SERVER_VERSION:
    refused when the driver first uses the database, rather than on every
    post with the server's own error."""
    found = tuple(client.server_info()['versionArray'][:2])
    if found < MIN_SERVER_VERSION:
        raise errors.UnsupportedServer(
            'MongoDB {} is older than the {} the delay.mongodb driver '
            'needs (its posts use update pipelines)'.format(
                '.'.join(map(str, found)),
                '.'.join(map(str, MIN_SERVER_VERSION))))


def refused_as_duplicates(refused):
    """Whether every write a ``BulkWriteError`` reports failed on a
    unique index (and its write concern was met)."""
    details = refused.details or {}
    return not details.get('writeConcernErrors') and all(
        error.get('code') == DUPLICATE_KEY
        for error in details.get('writeErrors', []))


def mongodb_uri(uri):
    """``delay.mongodb://...`` (or ``mongodb://...``) as a pymongo URI."""
    scheme, sep, rest = uri.partition('://')
    if not sep or scheme not in SCHEMES:
        raise ValueError('MongoDB URI must start with delay.mongodb:// or '
                         'mongodb://; got {!r}'.format(scheme))
    return SCHEMES[scheme] + '://' + rest


def make_client(uri, server_selection_timeout, socket_timeout, factory=None):
    """A client for ``uri``; ``factory`` (tests only) replaces pymongo's."""
    factory = factory or pymongo.MongoClient
    selection_ms = int(server_selection_timeout * 1000)
    return factory(mongodb_uri(uri), serverSelectionTimeoutMS=selection_ms,
                   connectTimeoutMS=selection_ms,
                   socketTimeoutMS=int(socket_timeout * 1000))


def translate(call, *args, **kwargs):
    """Run ``call``; turn MongoDB faults into Zaqar's ConnectionError."""
    try:
        return call(*args, **kwargs)
    except PASSED_THROUGH:
        raise
    except mongo_errors.PyMongoError as exc:
        LOG.error('MongoDB operation failed: %s', exc)
        raise errors.BackendUnavailable(backend='MongoDB', reason=exc)


class GuardedCollection:
    """A pymongo collection whose every operation is :func:`translate`d;
    ``on_fault()`` runs before a fault is raised (the store clock measures
    its offset again: clock.py)."""

    def __init__(self, collection, on_fault=None):
        self._collection = collection
        self._on_fault = on_fault

    @property
    def raw(self):
        """The collection itself (index management, explain in tests)."""
        return self._collection

    def _translate(self, call, *args, **kwargs):
        try:
            return translate(call, *args, **kwargs)
        except errors.BackendUnavailable:
            if self._on_fault is not None:
                self._on_fault()
            raise

    def find(self, query, projection=None, sort=None, limit=0, hint=None,
             skip=0):
        def run():
            cursor = self._collection.find(query, projection)
            if sort:
                cursor = cursor.sort(sort)
            if skip:
                cursor = cursor.skip(skip)
            if limit:
                cursor = cursor.limit(limit)
            if hint:
                cursor = cursor.hint(hint)
            return list(cursor)
        return self._translate(run)

    def delete_all(self, query, sort=None, batch=None):
        """Delete every document of ``query``, ``batch`` (DELETE_BATCH)
        at a time in ``sort`` order, ids read first: no one request's
        work grows with how many match. Returns how many went."""
        batch = batch or DELETE_BATCH
        gone = 0
        while True:
            ids = [doc['_id'] for doc in self.find(query, {'_id': True},
                                                   sort, batch)]
            if ids:
                gone += self.delete_many({'$and': [
                    query, {'_id': {'$in': ids}}]}).deleted_count
            if len(ids) < batch:
                return gone

    def aggregate(self, pipeline):
        """The pipeline's documents, read within the translation (a
        cursor read later would let a fault through untranslated)."""
        return self._translate(
            lambda: list(self._collection.aggregate(pipeline)))

    def __getattr__(self, name):
        attr = getattr(self._collection, name)
        if not callable(attr):
            return attr
        return functools.partial(self._translate, attr)
