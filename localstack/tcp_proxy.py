"""A loopback TCP proxy that injects network faults between a client and
Redis. Imports only the standard library.

It forwards bytes both ways and can

* drop every client connection (``drop_all``), as a restarted load balancer
  or a network blip would;
* drop the reply of a command that ran (``drop_reply_probability``): it
  reads RESP in both directions, pairs each reply with its command, and for
  a successful reply to one of ``drop_commands`` (EVALSHA/EVAL: our Lua
  scripts) it swallows that reply and closes the connection. Redis executed
  the command; the client only sees a broken connection. This is what a
  retry after a lost reply looks like from inside the driver;
* drop the reply of the next such command that a test picks
  (``drop_next_reply(matches, then)``, ``matches(command bytes)``), the
  same way, and run ``then()`` (say, kill the server) before serving
  anything else.

Replies are forwarded only once complete (so a reply is either delivered
whole or not at all); requests are forwarded as they arrive. One thread
serves every connection with ``selectors``.

    proxy = TcpProxy(upstream_port).start()
    proxy.port               # point the client here
    proxy.drop_reply_probability = 0.05
    proxy.drop_next_reply(lambda command: b'pop' in command)
    proxy.counts             # {'connections': .., 'dropped_replies': ..}
    proxy.dropped            # [(time, command, swallowed reply), ...]
    proxy.errors             # the proxy's own failures (should be none)
"""

import collections
import random
import selectors
import socket
import threading
import time


class ProxyUnavailable(RuntimeError):
    """The proxy could not start; the message says why."""


class RespError(ValueError):
    pass


def parse_value(buf, start):
    """End offset of the complete RESP value at ``buf[start:]``, or None if
    it is not complete yet. RESP2 and the RESP3 types redis-py may see."""
    line_end = buf.find(b'\r\n', start)
    if line_end < 0:
        return None
    kind, head = buf[start:start + 1], buf[start + 1:line_end]
    after = line_end + 2
    if kind in (b'+', b'-', b':', b'_', b',', b'#', b'('):
        return after
    if kind in (b'$', b'=', b'!'):
        size = int(head)
        if size < 0:
            return after
        end = after + size + 2
        return end if len(buf) >= end else None
    if kind in (b'*', b'~', b'>', b'%', b'|'):
        count = int(head)
        if kind in (b'%', b'|'):
            count *= 2
        offset = after
        for _ in range(max(count, 0)):
            offset = parse_value(buf, offset)
            if offset is None:
                return None
        return offset
    raise RespError('not RESP: {!r}'.format(buf[start:start + 20]))


def command_words(command):
    """The words of one complete RESP array command, as bytes."""
    words, offset = [], command.find(b'\r\n') + 2
    while offset < len(command):
        size_end = command.find(b'\r\n', offset)
        size = int(command[offset + 1:size_end])
        words.append(bytes(command[size_end + 2:size_end + 2 + size]))
        offset = size_end + 2 + size + 2
    return words


def parse_command(buf, start):
    """(end offset, upper-case command name) of the complete command at
    ``buf[start:]``, or None. Inline commands (``PING\\r\\n``) too."""
    if buf[start:start + 1] != b'*':
        line_end = buf.find(b'\r\n', start)
        if line_end < 0:
            return None
        words = buf[start:line_end].split()
        return line_end + 2, (bytes(words[0]).upper() if words else b'')
    end = parse_value(buf, start)
    if end is None:
        return None
    # First element of the array: "*N\r\n$len\r\nNAME\r\n".
    first = buf.find(b'\r\n', start) + 2
    size_end = buf.find(b'\r\n', first)
    size = int(buf[first + 1:size_end])
    name = buf[size_end + 2:size_end + 2 + size]
    return end, bytes(name).upper()


class _Pair:
    """One client connection and its upstream connection."""

    def __init__(self, client, upstream):
        self.client = client
        self.upstream = upstream
        self.requests = bytearray()
        self.replies = bytearray()
        # (name, command bytes) of each command still awaiting its reply
        self.pending = collections.deque()
        self.closed = False


class TcpProxy:
    """Loopback TCP proxy to ``127.0.0.1:upstream_port`` (see module doc)."""

    def __init__(self, upstream_port, drop_commands=(b'EVALSHA', b'EVAL'),
                 seed=None):
        self.upstream_port = upstream_port
        self.drop_commands = frozenset(drop_commands)
        self.drop_reply_probability = 0.0
        self._drop_next = None
        self.port = None
        self.counts = collections.Counter()
        self.errors = []
        # (wall time, command, swallowed reply) of every dropped reply
        self.dropped = []
        self._random = random.Random(seed)
        self._selector = selectors.DefaultSelector()
        self._listener = None
        self._pairs = set()
        self._lock = threading.Lock()
        self._drop_all = False
        self._stopping = False
        self._thread = None

    # -- control (any thread) ---------------------------------------------

    def start(self):
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._listener.bind(('127.0.0.1', 0))
            self._listener.listen(128)
        except OSError as exc:
            self._listener.close()
            raise ProxyUnavailable(
                'the TCP fault proxy in front of 127.0.0.1:{} cannot listen '
                'on a free loopback port: {}'.format(self.upstream_port,
                                                    exc)) from exc
        self._listener.setblocking(False)
        self.port = self._listener.getsockname()[1]
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._thread = threading.Thread(target=self._serve, daemon=True,
                                         name='tcp-proxy')
        self._thread.start()
        return self

    def drop_all(self):
        """Close every open client connection (and its upstream)."""
        with self._lock:
            self._drop_all = True

    def drop_next_reply(self, matches, then=lambda: None):
        """Drop the reply of the next command of ``drop_commands`` for
        which ``matches(command bytes)`` is true, once; then call
        ``then()`` in the serving thread, before it serves anything
        else (a client's retry waits in the listener's backlog)."""
        with self._lock:
            self._drop_next = (matches, then)

    def _dropped_by_test(self, command):
        """The ``then`` of drop_next_reply if ``command`` is the one."""
        with self._lock:
            if self._drop_next is None or not self._drop_next[0](command):
                return None
            then, self._drop_next = self._drop_next[1], None
            return then

    def stop(self):
        self._stopping = True
        if self._thread is not None:
            self._thread.join(10)
        for pair in list(self._pairs):
            self._close(pair)
        self._selector.close()
        self._listener.close()

    # -- the serving thread ------------------------------------------------

    def _serve(self):
        while not self._stopping:
            with self._lock:
                drop, self._drop_all = self._drop_all, False
            if drop:
                for pair in list(self._pairs):
                    self.counts['dropped_connections'] += 1
                    self._close(pair)
            for key, _ in self._selector.select(timeout=0.05):
                if key.data is None:
                    self._accept()
                else:
                    pair, from_client = key.data
                    if not pair.closed:
                        try:
                            self._pump(pair, from_client)
                        except Exception as exc:
                            # A proxy bug: keep serving, let the test fail.
                            self.errors.append(repr(exc))
                            self._close(pair)

    def _accept(self):
        try:
            client, _ = self._listener.accept()
        except OSError:
            return
        try:
            upstream = socket.create_connection(
                ('127.0.0.1', self.upstream_port), timeout=1)
        except OSError:
            # Upstream down (e.g. being restarted): the client sees a
            # connection that closes at once, as with no proxy.
            self.counts['refused'] += 1
            client.close()
            return
        for sock in (client, upstream):
            sock.setblocking(True)
            sock.settimeout(5)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pair = _Pair(client, upstream)
        self._pairs.add(pair)
        self.counts['connections'] += 1
        self._selector.register(client, selectors.EVENT_READ, (pair, True))
        self._selector.register(upstream, selectors.EVENT_READ,
                                (pair, False))

    def _pump(self, pair, from_client):
        source = pair.client if from_client else pair.upstream
        try:
            data = source.recv(65536)
        except OSError:
            data = b''
        if not data:
            self._close(pair)
            return
        try:
            if from_client:
                self._forward_requests(pair, data)
            else:
                self._forward_replies(pair, data)
        except (OSError, RespError, ValueError):
            self._close(pair)

    def _forward_requests(self, pair, data):
        pair.requests += data
        offset = 0
        while True:
            parsed = parse_command(pair.requests, offset)
            if parsed is None:
                break
            start, (offset, name) = offset, parsed
            pair.pending.append((name, bytes(pair.requests[start:offset])
                                 if name in self.drop_commands else b''))
        del pair.requests[:offset]
        pair.upstream.sendall(data)

    def _forward_replies(self, pair, data):
        pair.replies += data
        offset = sent = 0
        while pair.pending:
            end = parse_value(pair.replies, offset)
            if end is None:
                break
            name, command = pair.pending.popleft()
            is_error = pair.replies[offset:offset + 1] == b'-'
            then = (self._dropped_by_test(command)
                    if name in self.drop_commands and not is_error
                    else None)
            if (name in self.drop_commands and not is_error
                    and (then is not None or self._random.random()
                         < self.drop_reply_probability)):
                pair.client.sendall(bytes(pair.replies[sent:offset]))
                self.counts['dropped_replies'] += 1
                self.dropped.append((time.time(), command,
                                     bytes(pair.replies[offset:end])))
                self._close(pair)
                if then is not None:
                    then()
                return
            offset = end
        if offset > sent:
            pair.client.sendall(bytes(pair.replies[sent:offset]))
        del pair.replies[:offset]

    def _close(self, pair):
        if pair.closed:
            return
        pair.closed = True
        self._pairs.discard(pair)
        for sock in (pair.client, pair.upstream):
            try:
                self._selector.unregister(sock)
            except (KeyError, ValueError):
                pass
            sock.close()
