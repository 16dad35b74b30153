"""The MongoDB data driver on mongomock, or on a real server.

With ``ZAQAR_DELAY_TEST_MONGODB_URI`` set (``mongodb://...``), the driver
talks to that server, each test in a fresh database. Otherwise it runs on
``mongomock``, injected through the driver's ``client_factory`` hook, with
the adaptations below for what mongomock does not do (each is listed in
docs/mongodb.md):

* ``hello`` is not implemented: it answers ``localTime`` from this host's
  clock, standing in for the server's.
* Writes are not atomic across threads (an update matches, then applies,
  without a lock), and a read copying a document that another thread
  updates in place fails ("dictionary changed size during iteration") or
  sees half a write: one lock around mongomock's writes and reads (cursor
  results, counts, distinct) stands in for the server's per-document
  atomicity, so the concurrency tests test the driver and not mongomock's
  races.
* ``create_index`` of an index that exists under that name rebuilds it,
  checking uniqueness without its partial filter: as on MongoDB, it is a
  no-op, so a second driver (a restart) can open a database with messages.
* pymongo 4.9+ hands each ``UpdateOne`` of a ``bulk_write`` a ``sort``
  argument, which mongomock's bulk builder does not take: passed on
  without it when it is None (a sort given is refused).
* Each insert and update checks every unique index by running a query
  through mongomock's generic filter over every document of the
  collection (about 16 us a document): a backlog of a thousand messages
  cost most of a test's time. Unique indexes on top-level scalar fields,
  whole or partial on ``{field: {$exists: true}}``, are checked by
  comparing the values instead; any other by mongomock.
"""

import datetime
import functools
import os
import threading
import uuid

import pymongo

from localstack import backends

URI_ENV = 'ZAQAR_DELAY_TEST_MONGODB_URI'
GROUP = 'drivers:message_store:delay.mongodb'

_adapted = False


def real_server_uri():
    return os.environ.get(URI_ENV) or None


def adapt_mongomock():
    """Patch mongomock once per process (idempotent)."""
    global _adapted
    if _adapted:
        return
    from mongomock import collection, database

    original_command = database.Database.command

    def command(self, command, **kwargs):
        name = command if isinstance(command, str) else next(iter(command))
        if name == 'hello':
            now = datetime.datetime.now(datetime.timezone.utc)
            millis = now.microsecond // 1000 * 1000
            return {'ok': 1.0, 'isWritablePrimary': True,
                    'localTime': now.replace(tzinfo=None, microsecond=millis)}
        return original_command(self, command, **kwargs)

    database.Database.command = command

    original_create_index = collection.Collection.create_index

    def create_index(self, keys, **kwargs):
        name = kwargs.get('name')
        if name and name in self.index_information():
            return name
        return original_create_index(self, keys, **kwargs)

    collection.Collection.create_index = create_index

    original_ensure_uniques = collection.Collection._ensure_uniques

    def ensure_uniques(self, new_data):
        # new_data is in the collection already: a second document with
        # its key values is a duplicate (mongomock's own rule).
        checks = []
        for index in self._store.indexes.values():
            if index.get('unique'):
                check = _value_check(index, new_data)
                if check is None:
                    return original_ensure_uniques(self, new_data)
                checks.append(check)
        for keys, indexed in checks:
            if not indexed(new_data):
                continue
            wanted = [new_data.get(key) for key in keys]
            same = sum(1 for doc in list(self._store.documents)
                       if indexed(doc)
                       and [doc.get(key) for key in keys] == wanted)
            if same > 1:
                raise collection.DuplicateKeyError(
                    'E11000 Duplicate Key Error', 11000)

    collection.Collection._ensure_uniques = ensure_uniques

    original_add_update = collection.BulkOperationBuilder.add_update

    def add_update(self, *args, sort=None, **kwargs):
        if sort is not None:
            raise NotImplementedError('mongomock: bulk update with sort')
        return original_add_update(self, *args, **kwargs)

    collection.BulkOperationBuilder.add_update = add_update

    lock = threading.RLock()

    def locked(method):
        @functools.wraps(method)
        def run(*args, **kwargs):
            with lock:
                return method(*args, **kwargs)
        return run

    for name in ('_insert', '_update', '_delete', '_find_and_modify',
                 'count_documents', 'distinct'):
        setattr(collection.Collection, name,
                locked(getattr(collection.Collection, name)))
    collection.Cursor._compute_results = locked(
        collection.Cursor._compute_results)
    _adapted = True


def _value_check(index, new_data):
    """(key fields, whether a document is in the index) for a unique
    index whose duplicates plain value comparison finds as mongomock's
    query would, else None."""
    keys = [key for key, _ in index['key']]
    if index.get('sparse') or any(
            '.' in key or isinstance(new_data.get(key), (list, dict))
            for key in keys):
        return None
    partial = index.get('partialFilterExpression')
    if partial is None:
        return keys, lambda doc: True
    if len(partial) == 1:
        [(field, condition)] = partial.items()
        if condition == {'$exists': True} and '.' not in field:
            return keys, lambda doc: field in doc
    return None


def mongomock_client_factory():
    """A ``client_factory`` for the driver: one fresh mongomock server."""
    import mongomock
    adapt_mongomock()
    client = mongomock.MongoClient()
    return lambda uri, **options: client


def make_driver(request, conf, database=None):
    from zaqar_delay.drivers.mongodb import driver
    redis_url = request.getfixturevalue('redis_url')
    database = database or 'zd_test_' + uuid.uuid4().hex[:12]
    conf.set_override('database', database, group=GROUP)
    uri = real_server_uri()
    if uri:
        conf.set_override('uri', uri, group=GROUP)
        factory = None
    else:
        factory = mongomock_client_factory()
    data_driver = driver.DataDriver(
        conf, None, backends.control_driver(conf, redis_url),
        client_factory=factory)
    if uri:
        request.addfinalizer(lambda: _drop(uri, database))
    return data_driver


def zaqar_store(request):
    """(message_store name, its zaqar.conf options) for Zaqar itself.

    On mongomock, the drivers that Zaqar builds in this process get the
    mongomock client through ``DataDriver.client_factory`` for this test.
    """
    from zaqar_delay.drivers.mongodb import driver
    database = 'zd_test_' + uuid.uuid4().hex[:12]
    uri = real_server_uri()
    if uri:
        request.addfinalizer(lambda: _drop(uri, database))
        return 'delay.mongodb', {'uri': uri, 'database': database}
    monkeypatch = request.getfixturevalue('monkeypatch')
    monkeypatch.setattr(driver.DataDriver, 'client_factory',
                        staticmethod(mongomock_client_factory()))
    return 'delay.mongodb', {'uri': 'delay.mongodb://127.0.0.1:27017',
                             'database': database}


def _drop(uri, database):
    client = pymongo.MongoClient(uri)
    client.drop_database(database)
    client.close()


class StandaloneView:
    """mongomock's client as Zaqar's driver probes it: one node, no mongos,
    the default write concern (mongomock takes these attribute names for
    databases); fine with unreliable = True."""

    nodes = frozenset()
    is_mongos = False
    write_concern = pymongo.WriteConcern()

    def __init__(self, client):
        self._client = client

    def __getattr__(self, name):
        return getattr(self._client, name)

    def __getitem__(self, name):
        return self._client[name]
