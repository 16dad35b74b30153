"""Faults the Redis history tests inject into a redis-server or a cluster.

Each talks to a server on a direct loopback connection of its own, never
through the driver under test.
"""

import time

from localstack.redis_cluster import command


def stall(port, seconds):
    """Block Redis for ``seconds`` (DEBUG SLEEP) on a direct connection."""
    reply = command(port, 'DEBUG', 'SLEEP', '%.1f' % seconds,
                    timeout=seconds + 10)
    if not reply.startswith(b'+OK'):
        raise RuntimeError('DEBUG SLEEP refused: {!r}'.format(reply))


def drop_clients(port):
    """Close every client connection of the server at ``port`` (not the
    cluster bus, not replication links): what a network blip does."""
    reply = command(port, 'CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME',
                    'yes')
    if not reply.startswith(b':'):
        raise RuntimeError('CLIENT KILL refused: {!r}'.format(reply))
    return int(reply[1:])


def cluster_state(node):
    """``ok`` or ``fail`` as ``node`` sees its cluster, or None if it does
    not answer."""
    try:
        reply = node.info()
    except OSError:
        return None
    for line in reply.split(b'\r\n'):
        if line.startswith(b'cluster_state:'):
            return line.split(b':', 1)[1].decode()
    return None


def kill_master(cluster, node, hold_after_fail=None, timeout=60):
    """SIGKILL ``node`` (a master of ``cluster``), restart it on its port
    and directory (append-only file and nodes.conf), and wait until every
    node says ``cluster_state:ok``. With ``hold_after_fail`` (seconds), the
    node stays down until the others have marked it failed and the whole
    cluster answers CLUSTERDOWN (after ``cluster-node-timeout``), and that
    much longer; otherwise it is restarted at once, usually before the
    others notice. Returns the seconds the node was down and the seconds
    until the cluster was ok again (from the kill)."""
    others = [n for n in cluster.nodes if n is not node]
    node.stop()
    down = time.monotonic()
    if hold_after_fail is None:
        time.sleep(0.3)
    else:
        deadline = down + timeout
        while not any(cluster_state(n) == 'fail' for n in others):
            if time.monotonic() > deadline:
                raise RuntimeError('cluster still ok {} s after a master '
                                   'was killed'.format(timeout))
            time.sleep(0.1)
        time.sleep(hold_after_fail)
    outage = time.monotonic() - down
    node.start()
    cluster.wait_ok(timeout)
    return outage, time.monotonic() - down
