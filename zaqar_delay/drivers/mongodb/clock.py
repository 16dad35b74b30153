"""The store clock: "now" for every due-time decision, in epoch ms.

Every API node decides with the MongoDB server's clock (SPEC §7), so skew
between Zaqar nodes cannot hand out a message early. The server's time is
the ``hello`` command's ``localTime``. ``$$NOW`` would save reading it,
but one operation needs the same instant in several statements (filters
such as ``d <= now`` for an index range, stored claim expiries, ages
returned to the client), a filter would have to wrap it in ``$expr``, and
mongomock, the test double, does not evaluate it; so the value is read
and passed down.

With ``clock_sync_interval`` > 0 (the default) the driver does not read it
on every operation: it measures the offset between the server's clock and
this process's monotonic clock, and adds it to the monotonic clock. The
offset is measured again every ``clock_sync_interval`` seconds and after
any MongoDB fault (a failover may have made another member, with another
clock, the primary). A measurement whose round trip took longer than
MAX_SYNC_RTT_MS is not kept (that operation uses the server time read
itself, the next one measures again), so a kept offset is within half
that round trip of the server's clock; the monotonic clock is never
stepped (NTP only slews it, at most 500 ppm), which adds at most 0.5 ms
per second since the measurement. With 0, every operation reads the
server clock (one request more). docs/mongodb.md, *Time*, states the
bound.
"""

import calendar
import datetime
import threading
import time

# Longest round trip of a measurement kept as the offset: the offset is
# then within half of it of the server's clock.
MAX_SYNC_RTT_MS = 50


def epoch_ms(moment):
    """A ``datetime`` (naive UTC, as pymongo returns it) as epoch ms."""
    return (calendar.timegm(moment.utctimetuple()) * 1000
            + moment.microsecond // 1000)


def as_date(epoch_ms):
    """Epoch ms as a naive UTC ``datetime``, as pymongo stores it and
    MongoDB's TTL monitor compares it (epoch_ms's inverse)."""
    return datetime.datetime.fromtimestamp(
        epoch_ms / 1000, tz=datetime.timezone.utc).replace(tzinfo=None)


def _monotonic_ms():
    return time.monotonic() * 1000


class StoreClock:

    def __init__(self, read_server_time, sync_interval=0.0):
        self._read = read_server_time
        self._interval_ms = sync_interval * 1000
        self._offset_ms = None
        self._synced_at = 0.0
        self._lock = threading.Lock()
        self.override = None

    def __call__(self):
        if self.override is not None:
            return int(self.override())
        if not self._interval_ms:
            return epoch_ms(self._read())
        with self._lock:
            if (self._offset_ms is not None and _monotonic_ms()
                    - self._synced_at <= self._interval_ms):
                return int(_monotonic_ms() + self._offset_ms)
        return self._sync()

    def _sync(self):
        before = _monotonic_ms()
        server = epoch_ms(self._read())
        after = _monotonic_ms()
        if after - before <= MAX_SYNC_RTT_MS:
            with self._lock:
                self._offset_ms = server - (before + after) / 2
                self._synced_at = after
        return server

    def invalidate(self):
        """Measure the offset again at the next call (after a fault)."""
        with self._lock:
            self._offset_ms = None
