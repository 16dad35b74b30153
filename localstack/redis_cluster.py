"""A Redis Cluster of N masters (no replicas) on loopback ports.

Each node is a ``RedisServer`` with ``cluster-enabled yes`` and its own
directory, so ``node.stop()`` (SIGKILL by PID) then ``node.start()`` brings
it back on the same port: ``nodes.conf`` restores its place and slots in the
cluster and, with ``appendonly``, the append-only file its data. The
cluster is joined with CLUSTER MEET and the 16384 slots split evenly with
CLUSTER ADDSLOTS (works without redis-cli and on every Redis >= 3). Imports
only the standard library and the test servers.
"""

import socket
import time

from localstack.redis_server import RedisServer
from localstack.redis_server import RedisUnavailable
from localstack.redis_server import free_port

SLOTS = 16384
BUS_OFFSET = 10000  # a node's cluster bus listens on its port + 10000


def command(port, *words, timeout=5.0):
    """Send one command in RESP to a loopback node; its reply as bytes
    (errors included, not raised: callers check the text)."""
    parts = [b'*%d\r\n' % len(words)]
    for word in words:
        word = str(word).encode()
        parts.append(b'$%d\r\n%s\r\n' % (len(word), word))
    with socket.create_connection(('127.0.0.1', port), timeout) as sock:
        sock.sendall(b''.join(parts))
        return _read_reply(sock.makefile('rb'))


def _read_reply(stream):
    line = stream.readline()
    if not line:
        raise OSError('connection closed')
    kind, rest = line[:1], line[1:-2]
    if kind in (b'+', b'-', b':'):
        return line[:-2]
    if kind == b'$':
        size = int(rest)
        return b'' if size < 0 else stream.read(size + 2)[:-2]
    if kind == b'*':
        return b'\r\n'.join(_read_reply(stream)
                            for _ in range(max(int(rest), 0)))
    raise OSError('unexpected reply %r' % line)


def cluster_free_port():
    """A free loopback port whose cluster bus port (port + 10000, which
    must stay below 65536) is free too."""
    for _ in range(100):
        port = free_port()
        if port + BUS_OFFSET < 65536 and _bindable(port + BUS_OFFSET):
            return port
    raise RedisUnavailable('no free port pair for a cluster node')


def _bindable(port):
    with socket.socket() as sock:
        try:
            sock.bind(('127.0.0.1', port))
        except OSError:
            return False
    return True


class ClusterNode:
    """One master: ``.port``, ``.pid``, ``.stop()`` kills it by PID,
    ``.start()`` restarts it on the same port and directory."""

    def __init__(self, appendonly, node_timeout_ms):
        self.server = RedisServer(persistent=appendonly, args=[
            '--cluster-enabled', 'yes',
            '--cluster-config-file', 'nodes.conf',
            '--cluster-node-timeout', str(node_timeout_ms)])
        self.slots = range(0)  # set when the cluster assigns them

    @property
    def port(self):
        return self.server.port

    @property
    def pid(self):
        process = self.server.process
        return process.pid if process is not None else None

    def launch(self):
        self.server.start(port=cluster_free_port())
        return self

    def stop(self):
        self.server.kill()

    def start(self):
        self.server.restart()
        return self

    def remove(self):
        self.server.stop()

    def info(self):
        return command(self.port, 'CLUSTER', 'INFO', timeout=1.0)

    def node_id(self):
        return command(self.port, 'CLUSTER', 'MYID').decode()


class RedisCluster:

    def __init__(self, masters=3, appendonly=True, node_timeout_ms=2000):
        self.masters = masters
        self.appendonly = appendonly
        self.node_timeout_ms = node_timeout_ms
        self.nodes = []

    @property
    def url(self):
        """Our driver's URI for this cluster, every master a seed."""
        hosts = ','.join('127.0.0.1:%d' % node.port for node in self.nodes)
        return 'delay.redis://{}?cluster=true'.format(hosts)

    def start(self, timeout=30):
        try:
            for _ in range(self.masters):
                self.nodes.append(
                    ClusterNode(self.appendonly,
                                self.node_timeout_ms).launch())
            self._assign_slots()
            for node in self.nodes[1:]:
                reply = command(node.port, 'CLUSTER', 'MEET', '127.0.0.1',
                                self.nodes[0].port)
                if reply != b'+OK':
                    raise RedisUnavailable('CLUSTER MEET: %r' % reply)
            self.wait_ok(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _assign_slots(self):
        count = len(self.nodes)
        for index, node in enumerate(self.nodes):
            first = SLOTS * index // count
            last = SLOTS * (index + 1) // count
            node.slots = range(first, last)
            reply = command(node.port, 'CLUSTER', 'ADDSLOTS', *node.slots)
            if reply != b'+OK':
                raise RedisUnavailable('CLUSTER ADDSLOTS: %r' % reply)

    def wait_ok(self, timeout=30):
        """Until every node says ``cluster_state:ok`` and knows all the
        masters with all slots assigned; seconds taken."""
        start = time.monotonic()
        want = [b'cluster_state:ok',
                b'cluster_slots_assigned:%d' % SLOTS,
                b'cluster_known_nodes:%d' % len(self.nodes)]
        while time.monotonic() - start < timeout:
            try:
                infos = [node.info() for node in self.nodes]
            except OSError:
                infos = []
            if infos and all(all(field in info for field in want)
                             for info in infos):
                return time.monotonic() - start
            time.sleep(0.1)
        raise RedisUnavailable('cluster not ok within %d s' % timeout)

    def node_for_key(self, key):
        """The node that owns ``key``'s slot (no failover ever moves
        slots here: the cluster has no replicas)."""
        slot = int(command(self.nodes[0].port, 'CLUSTER', 'KEYSLOT',
                           key)[1:])
        for node in self.nodes:
            if slot in node.slots:
                return node
        raise LookupError(slot)

    def stop(self):
        for node in self.nodes:
            node.remove()
        self.nodes = []

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
