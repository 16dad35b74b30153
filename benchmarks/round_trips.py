"""Counts Redis round trips, per client, in this process.

redis-py writes each request to a connection's socket once (a single
command, a script call, or a whole pipeline), then reads the reply: so
every ``send_packed_command`` is one round trip. ``counting()`` records
the connections written to; ``RoundTrips.of(client)`` counts those of
one client's pool (our data store, or Zaqar's control store).
"""

import contextlib

from redis import connection as redis_connection


class RoundTrips:

    def __init__(self):
        self.sent = []

    def of(self, client):
        pool = client.connection_pool
        mine = set(pool._available_connections) | set(
            pool._in_use_connections)
        return sum(1 for conn in self.sent if conn in mine)

    @property
    def total(self):
        return len(self.sent)


@contextlib.contextmanager
def counting():
    """Within the block, record every request sent over any redis-py
    connection (a single-server or Sentinel client; a cluster client's
    node connections are counted in ``total`` only)."""
    counter = RoundTrips()
    original = redis_connection.AbstractConnection.send_packed_command

    def send(self, command, check_health=True):
        counter.sent.append(self)
        return original(self, command, check_health)

    redis_connection.AbstractConnection.send_packed_command = send
    try:
        yield counter
    finally:
        redis_connection.AbstractConnection.send_packed_command = original


def per_call(driver, project, queue):
    """{call: (round trips to the data store, to the control store)} of
    one post (10 messages), claim (10), delete and list on ``queue``, a
    queue of ``driver`` (ours or Zaqar's Redis driver) holding nothing."""
    from benchmarks import workloads
    messages = driver.message_controller
    body = [{'ttl': 3600, 'body': n} for n in range(10)]
    claimed = []
    calls = (
        ('post (10 messages)', lambda: messages.post(
            queue, body, workloads.CLIENT, project=project)),
        ('claim (10)', lambda: claimed.extend(list(
            driver.claim_controller.create(
                queue, workloads.CLAIM, project=project, limit=10)))),
        ('delete', lambda: messages.delete(
            queue, list(claimed[1])[0]['id'], project=project,
            claim=claimed[0])),
        ('list', lambda: list(next(messages.list(queue, project=project)))),
    )
    # The first pass loads the scripts and opens the connections; the
    # second is counted.
    for _ in range(2):
        claimed.clear()
        figures = {}
        for name, call in calls:
            with counting() as counter:
                call()
            figures[name] = (counter.of(driver.connection),
                             counter.of(driver.control_driver.connection))
    return figures
