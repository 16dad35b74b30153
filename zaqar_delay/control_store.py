"""Calls into Zaqar's control store (queue metadata, catalogue, pools).

Our drivers read queue metadata from Zaqar's control driver, create a
missing dead-letter queue through it, and ask it whether a queue exists
for stats. Zaqar's control drivers let their client's errors through once
their own retries are spent: its Redis driver turns a redis-py
ConnectionError into a storage error, but not a TimeoutError (a control
Redis stalled or restarting past the socket timeout, after redis-py's own
retries: about 4 s) nor an error reply such as READONLY; its MongoDB
driver re-raises AutoReconnect. Zaqar's transport answers anything that
is not a storage error with a 500, so every such call of ours goes
through :func:`reached`, which makes the outages among them a 503 the
client may retry.
"""

import contextlib

import pymongo.errors
import redis.exceptions
from oslo_log import log as logging

from zaqar_delay import errors
from zaqar_delay import tally

LOG = logging.getLogger(__name__)

# The errors of the clients Zaqar's control drivers use that mean "the
# store could not do it now": nothing our caller did wrong. redis-py's
# ConnectionError covers LOADING (BusyLoadingError); READONLY is a
# control Redis demoted to a replica (a failover). pymongo's
# ConnectionFailure covers AutoReconnect, NotPrimaryError and its
# timeouts. Any other error reply (a ResponseError such as WRONGTYPE)
# is a mistake of ours or a damaged store, not an outage: it stays a
# plain exception, which Zaqar answers with a 500.
FAULTS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
          redis.exceptions.ReadOnlyError, pymongo.errors.ConnectionFailure)


@contextlib.contextmanager
def reached():
    """Turn a control-store client error raised in the block into
    BackendUnavailable (a storage error: Zaqar answers 503)."""
    try:
        yield
    except FAULTS as exc:
        LOG.error("Zaqar's control store is unavailable: %r", exc)
        tally.count(tally.ERROR, 'control', exc)
        raise errors.BackendUnavailable(
            backend="Zaqar's control store", reason=exc) from exc
