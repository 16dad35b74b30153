"""The store clock: "now" for every due-time decision, in epoch ms.

MongoDB's own time is read with the ``hello`` command (``localTime``), once
per operation, so every Zaqar node decides with the same clock and skew
between API nodes cannot hand out a message early. ``$$NOW`` would save
the round trip, but one operation needs the same instant in several
statements (filters such as ``d <= now`` for an index range, stored claim
expiries, ages returned to the client), a filter would have to wrap it in
``$expr``, and mongomock, the test double, does not evaluate it; so the
value is read once and passed down.

With ``clock_sync_interval`` > 0 the driver instead measures the offset
between the server's clock and its own every that many seconds and adds
it to the local clock (half a round trip of error, plus local drift
between syncs), trading exactness for one round trip less per operation.
"""

import calendar
import threading
import time


def epoch_ms(moment):
    """A ``datetime`` (naive UTC, as pymongo returns it) as epoch ms."""
    return (calendar.timegm(moment.utctimetuple()) * 1000
            + moment.microsecond // 1000)


class StoreClock:

    def __init__(self, read_server_time, sync_interval=0.0):
        self._read = read_server_time
        self._interval = sync_interval
        self._offset_ms = None
        self._synced_at = 0.0
        self._lock = threading.Lock()
        self.override = None

    def __call__(self):
        if self.override is not None:
            return int(self.override())
        if not self._interval:
            return epoch_ms(self._read())
        with self._lock:
            if (self._offset_ms is None
                    or time.monotonic() - self._synced_at > self._interval):
                before = time.time() * 1000
                server = epoch_ms(self._read())
                after = time.time() * 1000
                self._offset_ms = server - (before + after) / 2
                self._synced_at = time.monotonic()
            return int(time.time() * 1000 + self._offset_ms)
