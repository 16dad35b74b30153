"""A Redis master and its replica; with three Sentinels on loopback.

The Sentinels watch the master under the name ``MASTER`` with a quorum of
two and declare it down after ``down_after_ms``; ``kill_master()`` SIGKILLs
it so that they fail over to the replica. Imports only the standard
library and the test servers.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import textwrap
import time

from localstack import processes
from localstack import redis_server
from localstack.redis_server import RedisServer
from localstack.redis_server import RedisUnavailable
from localstack.redis_server import free_port

MASTER = 'zdmaster'
SENTINELS = 3
# A master waits 5 s by default before a diskless full sync, for more
# replicas to share it; these sets have one.
SYNC_NOW = ('--repl-diskless-sync-delay', '0')


def _ask(port, *words, timeout=0.5):
    """One inline command to a loopback Redis or Sentinel; its raw reply."""
    with socket.create_connection(('127.0.0.1', port), timeout) as sock:
        sock.sendall(' '.join(words).encode() + b'\r\n')
        time.sleep(0.05)
        return sock.recv(65536)


def _offset(port, field):
    """One ``<field>:<n>`` of a server's ``INFO replication``, as an int."""
    for line in _ask(port, 'INFO', 'replication').split(b'\r\n'):
        if line.startswith(field + b':'):
            return int(line.split(b':')[1])
    raise RedisUnavailable('no %s from port %d' % (field.decode(), port))


class SentinelSet:

    def __init__(self, down_after_ms=1000, failover_timeout_ms=5000):
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.master = self.replica = None
        self.sentinel_ports = []
        self._sentinels = []
        self.workdir = None

    @property
    def uri(self):
        """Our driver's URI for this set, in Zaqar's Sentinel form."""
        hosts = ','.join('127.0.0.1:%d' % port
                         for port in self.sentinel_ports)
        return 'delay.redis://{}/0?master={}'.format(hosts, MASTER)

    def start(self, timeout=30):
        self.workdir = tempfile.mkdtemp(prefix='zd-sentinel-')
        self.master, self.replica = replicated_pair()
        for _ in range(SENTINELS):
            self._start_sentinel()
        self._wait_until_watched(timeout)
        return self

    def _start_sentinel(self):
        port = free_port()
        path = os.path.join(self.workdir, 'sentinel-%d.conf' % port)
        with open(path, 'w') as conf:
            conf.write(textwrap.dedent('''\
                port {port}
                bind 127.0.0.1
                dir {dir}
                logfile {dir}/sentinel-{port}.log
                sentinel monitor {name} 127.0.0.1 {master} 2
                sentinel down-after-milliseconds {name} {down}
                sentinel failover-timeout {name} {failover}
                sentinel parallel-syncs {name} 1
                ''').format(port=port, dir=self.workdir, name=MASTER,
                            master=self.master.port, down=self.down_after_ms,
                            failover=self.failover_timeout_ms))
        process = subprocess.Popen(
            [redis_server.find_binary(), path, '--sentinel'],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._sentinels.append(process)
        self.sentinel_ports.append(port)

    def _wait_until_watched(self, timeout):
        """Until every Sentinel knows the replica and the other Sentinels
        (a failover needs both) and the replica is in sync."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                ready = all(
                    b'num-other-sentinels\r\n$1\r\n%d' % (SENTINELS - 1)
                    in _ask(port, 'SENTINEL', 'MASTER', MASTER)
                    and b'num-slaves\r\n$1\r\n1'
                    in _ask(port, 'SENTINEL', 'MASTER', MASTER)
                    for port in self.sentinel_ports)
                ready = ready and b'master_link_status:up' in _ask(
                    self.replica.port, 'INFO', 'replication')
            except OSError:
                ready = False
            if ready:
                return
            time.sleep(0.2)
        self.stop()
        raise RedisUnavailable('Sentinels did not start watching in %d s'
                               % timeout)

    def master_port(self):
        """The master's port as the first Sentinel that answers says."""
        for port in self.sentinel_ports:
            try:
                reply = _ask(port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME',
                             MASTER)
            except OSError:
                continue
            return int(reply.split(b'\r\n')[-2])
        raise RedisUnavailable('no Sentinel answers')

    def wait_until_replicated(self, timeout=10):
        """Until the replica has applied every write the master made so far.

        Compares replication offsets, so it covers every connection's
        writes: Redis documents ``WAIT`` for the calling connection's own.
        """
        target = _offset(self.master.port, b'master_repl_offset')
        deadline = time.monotonic() + timeout
        while _offset(self.replica.port, b'slave_repl_offset') < target:
            if time.monotonic() > deadline:
                raise AssertionError('replica behind after %d s' % timeout)
            time.sleep(0.05)

    def kill_master(self):
        self.master.kill()

    def wait_for_failover(self, timeout=30):
        """Until the Sentinels name the replica as master; seconds taken."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if self.master_port() == self.replica.port:
                return time.monotonic() - start
            time.sleep(0.1)
        raise AssertionError('no failover within %d s' % timeout)

    def fail_over(self, timeout=30):
        """SIGKILL the master, wait until the Sentinels promote the
        replica, then start a new replica of it, so that another failover
        can follow. Returns the seconds until the promotion."""
        self._wait_until_replica_known(timeout)
        self.kill_master()
        seconds = self.wait_for_failover(timeout)
        dead, self.master = self.master, self.replica
        dead.stop()
        self.replica = _start_replica_of(self.master)
        # A full sync on a loaded machine (the master forks, the replica
        # loads, then rewrites its append-only file) has taken over 30 s.
        _wait_linked(self.replica, 2 * timeout)
        return seconds

    def _wait_until_replica_known(self, timeout):
        """Until a majority of the Sentinels list the replica as up (they
        find a new one in the master's INFO, every 10 s): before that they
        cannot promote it."""
        deadline = time.monotonic() + timeout
        port = b'%d' % self.replica.port
        while time.monotonic() < deadline:
            knowing = 0
            for sentinel in self.sentinel_ports:
                try:
                    reply = _ask(sentinel, 'SENTINEL', 'REPLICAS', MASTER)
                except OSError:
                    continue
                entries = reply.split(b'name\r\n')
                knowing += any(port in entry and b'_down' not in entry
                               for entry in entries)
            if knowing > SENTINELS // 2:
                return
            time.sleep(0.2)
        raise AssertionError('Sentinels did not find the replica in %d s'
                             % timeout)

    def stop(self):
        for process in self._sentinels:
            processes.stop(process)
        self._sentinels = []
        for server in (self.master, self.replica):
            if server is not None:
                server.stop()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None


def replicated_pair(timeout=20):
    """(master, replica) RedisServers, the replica in sync."""
    master = RedisServer(persistent=True, args=SYNC_NOW).start()
    replica = _start_replica_of(master)
    try:
        _wait_linked(replica, timeout)
    except RedisUnavailable:
        master.stop()
        replica.stop()
        raise
    return master, replica


def _start_replica_of(master):
    return RedisServer(persistent=True, args=[
        *SYNC_NOW, '--replicaof', '127.0.0.1', str(master.port)]).start()


def _wait_linked(replica, timeout):
    """Until ``replica`` is in sync with its master."""
    deadline = time.monotonic() + timeout
    while True:
        replication = _ask(replica.port, 'INFO', 'replication')
        if b'master_link_status:up' in replication:
            return
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    raise RedisUnavailable(
        'replica on port %d did not sync in %d s; its INFO replication: '
        '%s; the end of its log: %s' % (
            replica.port, timeout, replication.decode(errors='replace'),
            _log_tail(replica)))


def _log_tail(server, lines=15):
    try:
        with open(os.path.join(server.workdir, 'redis.log'), 'rb') as log:
            return b' | '.join(log.read().splitlines()[-lines:]).decode(
                errors='replace')
    except OSError as exc:
        return 'unreadable (%s)' % exc
