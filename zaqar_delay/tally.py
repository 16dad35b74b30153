"""Store faults this process met, by backend and kind, for the metrics
``zaqar-delay-gc --metrics_port`` serves.

Process-local: each process counts its own calls (the gc daemon's, when it
serves them). Only the Redis driver retries calls itself and counts here;
pymongo and python-swiftclient retry inside their clients, out of sight.
"""

import collections
import threading

RETRY = 'retry'    # a call tried again after a fault
ERROR = 'error'    # a call given up: the caller got BackendUnavailable

_lock = threading.Lock()
_counts = collections.Counter()


def count(event, backend, exc):
    """Count one ``event`` (RETRY or ERROR) of ``backend`` caused by
    ``exc`` (its class name is the kind)."""
    with _lock:
        _counts[event, backend, type(exc).__name__] += 1


def snapshot():
    """{(event, backend, kind): count} so far."""
    with _lock:
        return dict(_counts)
