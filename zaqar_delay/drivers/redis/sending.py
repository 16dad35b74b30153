"""How a queue script's EVALSHA reaches a single server or a Sentinel
master: past redis-py's command layer, on a connection this process keeps.

Measured side by side on one redis-server (docs/redis.md, *What one call
costs besides its round trip*): redis-py 8's ``execute_command`` spends
about 20 us of CPU per call in its retry wrapper (ours is the only retry
policy, connection.guarded), observability records and event dispatch;
taking a connection from the pool and giving it back costs as much again
(a lock, more records, and a poll of the socket). A post of 10 and a
delete are one such call each, so both are skipped on the hot path.

What the library's path guaranteed still holds. A call that fails with
anything but an error reply disconnects its connection, as redis-py's
command layer does, so it never holds half a reply; the next call
connects again (on a Sentinel client, to the master
the Sentinels name then). What the pool's poll caught, a connection the
server or a proxy closed while it sat idle, is checked the same way
before a call on a connection idle for over ``IDLE_CHECK_S``, so such a
close costs a reconnect, not a failed call and its retry.
"""

import os
import threading
import time
import weakref

from redis import exceptions as redis_errors

try:
    from hiredis import pack_command
except ImportError:  # redis-py without hiredis: its own packing
    pack_command = None

# A connection unused this long is polled before a call, as the pool
# polls every connection it hands out.
IDLE_CHECK_S = 1.0


class HeldConnection:
    """One of the pool's connections, kept for this process's script
    calls. A call that finds it busy (another thread's call is on it)
    takes a connection from the pool for itself, as redis-py would; a
    forked child takes one of its own (the pool starts afresh there)."""

    def __init__(self, pool):
        self._pool = pool
        self._forget_for_child()
        _KEPT.add(self)

    def _forget_for_child(self):
        # In a forked child: the parent's connection is not ours to use,
        # and its lock may have been held by a thread the child lacks.
        self._lock = threading.Lock()
        self._conn = None
        self._last_used = 0.0

    def evalsha(self, sha, script_keys, script_args):
        command = ('EVALSHA', sha, len(script_keys), *script_keys,
                   *script_args)
        if not self._lock.acquire(blocking=False):
            return _on_pooled(self._pool, command)
        try:
            return _send(self._ready(), command)
        finally:
            self._last_used = time.monotonic()
            self._lock.release()

    def _ready(self):
        if self._conn is None:
            self._conn = self._pool.get_connection()
        elif time.monotonic() - self._last_used > IDLE_CHECK_S:
            try:
                closed_or_dirty = self._conn.can_read()
            except (redis_errors.ConnectionError, redis_errors.TimeoutError,
                    OSError):
                closed_or_dirty = True
            if closed_or_dirty:
                self._conn.disconnect()  # the send connects again
        return self._conn


_KEPT = weakref.WeakSet()


def _after_fork_in_child():
    for held in list(_KEPT):
        held._forget_for_child()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _on_pooled(pool, command):
    conn = pool.get_connection()
    try:
        return _send(conn, command)
    finally:
        pool.release(conn)


def _send(conn, command):
    try:
        if pack_command is None:
            conn.send_command(*command)
        else:
            # What redis-py's hiredis packer ends with, without its walk
            # over every argument in Python (82 for a post of 10): ours
            # are only str, bytes and int, which hiredis packs itself.
            conn.send_packed_command([pack_command(command)])
        return conn.read_response()
    except redis_errors.ResponseError:
        raise  # an error reply, read whole: the connection is clean
    except BaseException:
        # A Sentinel-managed connection does not disconnect itself when a
        # read fails (redis-py's command layer does it): it could be left
        # with half a reply, which the next call would read as its own.
        conn.disconnect()
        raise
