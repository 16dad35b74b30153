"""Counts round trips per call, in this process.

Redis: redis-py writes each request to a connection's socket once (a
single command, a script call, or a whole pipeline), then reads the
reply: so every ``send_packed_command`` is one round trip. ``counting()``
records the connections written to; ``RoundTrips.of(client)`` counts
those of one client's pool (our data store, or Zaqar's control store).

MongoDB: on a real server, every command pymongo sends (``find``,
``getMore``, ``insert``, ``update``, ``aggregate``...), seen by a
``pymongo.monitoring.CommandListener``; on mongomock, which sends
nothing, every outermost call of a collection or database method that
would send one (``mongodb_counting()``; a method mongomock implements with
another counts once).
"""

import contextlib
import threading

from pymongo import monitoring

from redis import connection as redis_connection


class RoundTrips:

    def __init__(self):
        self.sent = []
        # What each of ``sent`` wrote, read only by commands_of.
        self.packed = []

    def _mine(self, client):
        pool = client.connection_pool
        return set(pool._available_connections) | set(
            pool._in_use_connections)

    def of(self, client):
        mine = self._mine(client)
        return sum(1 for conn in self.sent if conn in mine)

    def commands_of(self, client):
        """Per round trip on ``client``'s pool, the names of the commands
        it wrote (one for a command or a script call, several for a
        pipeline)."""
        mine = self._mine(client)
        return [command_names(packed)
                for conn, packed in zip(self.sent, self.packed)
                if conn in mine]

    @property
    def total(self):
        return len(self.sent)


def command_names(packed):
    """The names of the commands in what a connection writes at once
    (RESP arrays: one per command)."""
    data = packed if isinstance(packed, bytes) else b''.join(packed)
    found, at = [], 0
    while at < len(data):
        end = data.index(b'\r\n', at)
        count, at = int(data[at + 1:end]), end + 2
        for index in range(count):
            end = data.index(b'\r\n', at)
            length, at = int(data[at + 1:end]), end + 2
            if index == 0:
                found.append(data[at:at + length].decode().upper())
            at += length + 2
    return found


@contextlib.contextmanager
def counting():
    """Within the block, record every request sent over any redis-py
    connection (a single-server or Sentinel client; a cluster client's
    node connections are counted in ``total`` only)."""
    counter = RoundTrips()
    original = redis_connection.AbstractConnection.send_packed_command

    def send(self, command, check_health=True):
        counter.sent.append(self)
        counter.packed.append(command)
        return original(self, command, check_health)

    redis_connection.AbstractConnection.send_packed_command = send
    try:
        yield counter
    finally:
        redis_connection.AbstractConnection.send_packed_command = original


def redis_round_trips(driver, call):
    """(round trips to ``driver``'s data store, to its control store) of
    ``call()``."""
    with counting() as counter:
        call()
    return (counter.of(driver.connection),
            counter.of(driver.control_driver.connection))


# What mongomock answers without a server round trip of its own: cursor
# plumbing, and the helpers that only build a request.
_MONGOMOCK_METHODS = (
    'find', 'find_one', 'insert_one', 'insert_many', 'update_one',
    'update_many', 'replace_one', 'delete_one', 'delete_many',
    'find_one_and_update', 'find_one_and_delete', 'find_one_and_replace',
    'count_documents', 'estimated_document_count', 'aggregate',
    'bulk_write', 'distinct', 'create_index')


@contextlib.contextmanager
def mongodb_counting():
    """Within the block, count the MongoDB requests sent, on a real
    server (commands, by a CommandListener registered before the clients
    were made: see ``MongoCommands``) or on mongomock (outermost calls of
    the collection and database methods that send one). Yields a list
    whose length is the count."""
    from mongomock import collection, database
    sent, depth = [], threading.local()
    originals = {(cls, name): getattr(cls, name)
                 for cls, names in ((collection.Collection,
                                     _MONGOMOCK_METHODS),
                                    (database.Database, ('command',)))
                 for name in names}

    def wrap(original, name):
        def counted(*args, **kwargs):
            outer = not getattr(depth, 'inside', False)
            if outer:
                sent.append(name)
                depth.inside = True
            try:
                return original(*args, **kwargs)
            finally:
                if outer:
                    depth.inside = False
        return counted

    for (cls, name), original in originals.items():
        setattr(cls, name, wrap(original, name))
    MongoCommands.commands.clear()
    try:
        yield sent
    finally:
        for (cls, name), original in originals.items():
            setattr(cls, name, original)
        sent.extend(MongoCommands.commands)


class MongoCommands(monitoring.CommandListener):
    """The CommandListener that counts a real server's commands; register
    it (``pymongo.monitoring.register(MongoCommands())``) before the
    drivers make their clients."""

    commands = []

    def started(self, event):
        MongoCommands.commands.append(event.command_name)

    def succeeded(self, event):
        pass

    def failed(self, event):
        pass


def mongodb_round_trips(driver, call):
    """(MongoDB requests, round trips to Redis, the control store) of
    ``call()`` on ``driver``: every MongoDB request in the process counts,
    so only one driver may run meanwhile."""
    with mongodb_counting() as sent:
        with counting() as counter:
            call()
    return len(sent), counter.of(driver.control_driver.connection)


def per_call(driver, project, queue, measured=redis_round_trips):
    """{call: measured(driver, call)} of one post (10 messages), pop (1),
    claim (10), delete, list and get on ``queue``, a queue of
    ``driver`` (ours or Zaqar's) holding nothing."""
    from benchmarks import workloads
    messages = driver.message_controller
    body = [{'ttl': 3600, 'body': n} for n in range(10)]
    claimed, posted = [], []
    calls = (
        ('post (10 messages)', lambda: posted.extend(messages.post(
            queue, body, workloads.CLIENT, project=project))),
        ('pop (1)', lambda: messages.pop(queue, 1, project=project)),
        ('claim (10)', lambda: claimed.extend(list(
            driver.claim_controller.create(
                queue, workloads.CLAIM, project=project, limit=10)))),
        ('delete', lambda: messages.delete(
            queue, list(claimed[1])[0]['id'], project=project,
            claim=claimed[0])),
        # As Zaqar's API lists: naming the client.
        ('list', lambda: list(next(messages.list(
            queue, project=project, client_uuid=workloads.CLIENT)))),
        ('get', lambda: messages.get(queue, posted[-1], project=project)),
    )
    # The first pass loads the scripts, opens the connections and fills
    # the queue's policy copy, the second reads it into the process's
    # cache; the third is counted.
    for _ in range(3):
        claimed.clear()
        posted.clear()
        figures = {name: measured(driver, call) for name, call in calls}
    return figures
