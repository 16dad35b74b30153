"""A loopback HTTP proxy that loses the reply of a request that ran.

For the Swift driver what localstack/tcp_proxy.py is for Redis: it
forwards each request to the upstream server (the test Swift's proxy
server), and for a request that ``lose_reply_of(predicate)`` armed it
forwards the request, reads the whole reply, then closes the client's
connection without sending it: Swift did the work, the client sees a
broken connection, as when a load balancer or the network drops it. The
Host header is passed on, so tempauth hands out storage URLs that point
back at the proxy. Imports only the standard library.

    proxy = HttpProxy(swift_server.proxy_port).start()
    proxy.lose_reply_of(lambda method, path: method == 'PUT')
    proxy.lost        # [(method, path, upstream status), ...]

It can also answer a request itself, with a status Swift gives in a
race the test cannot time (the request never reaches Swift):

    proxy.answer_instead(lambda method, path: method == 'PUT', 404)
    proxy.answered    # [(method, path, status it answered), ...]

It also serves as a forward proxy (``http_proxy=http://127.0.0.1:<port>``):
a request whose target is a whole URL goes to the same upstream, and
``proxy.forwarded`` lists every request it passed on, ``(method, path)``.
"""

import http.client
import http.server
import threading
from urllib import parse

HOP_BY_HOP = ('connection', 'keep-alive', 'transfer-encoding')


class ProxyUnavailable(RuntimeError):
    """The proxy could not start; the message says why."""


class HttpProxy:

    def __init__(self, upstream_port, host='127.0.0.1'):
        self.upstream = (host, upstream_port)
        self.lost = []
        self.answered = []
        self.forwarded = []
        self._armed = []
        self._answers = []
        self._lock = threading.Lock()
        try:
            self._server = http.server.ThreadingHTTPServer(
                (host, 0), _handler_for(self))
        except OSError as exc:
            raise ProxyUnavailable(
                'the HTTP fault proxy in front of {}:{} cannot listen on a '
                'free port of {}: {}'.format(host, upstream_port, host,
                                             exc)) from exc
        self._server.daemon_threads = True

    @property
    def port(self):
        return self._server.server_address[1]

    def start(self):
        threading.Thread(target=self._server.serve_forever,
                         daemon=True).start()
        return self

    def stop(self):
        self._server.shutdown()
        self._server.server_close()

    def lose_reply_of(self, predicate):
        """Lose the reply of the next request for which
        ``predicate(method, path)`` is true."""
        with self._lock:
            self._armed.append(predicate)

    def answer_instead(self, predicate, status):
        """Answer the next request for which ``predicate(method, path)``
        is true with ``status`` and no body, without forwarding it."""
        with self._lock:
            self._answers.append((predicate, status))

    def _take(self, method, path):
        with self._lock:
            for predicate in self._armed:
                if predicate(method, path):
                    self._armed.remove(predicate)
                    return True
        return False

    def _answer(self, method, path):
        """The status to answer this request with instead of Swift's,
        or None."""
        with self._lock:
            for armed in self._answers:
                if armed[0](method, path):
                    self._answers.remove(armed)
                    self.answered.append((method, path, armed[1]))
                    return armed[1]
        return None


def _handler_for(proxy):

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'

        def log_message(self, *args):
            pass

        def _body(self):
            if self.headers.get('Transfer-Encoding', '').lower() == 'chunked':
                chunks = []
                while True:
                    size = int(self.rfile.readline().split(b';')[0], 16)
                    chunk = self.rfile.read(size + 2)[:size]
                    if not size:
                        return b''.join(chunks)
                    chunks.append(chunk)
            return self.rfile.read(int(self.headers.get('Content-Length')
                                       or 0))

        def _forward(self):
            if self.path.startswith('http://'):
                # Asked as a forward proxy: the upstream is the same.
                target = parse.urlsplit(self.path)
                self.path = target.path + (
                    '?' + target.query if target.query else '')
            body = self._body()
            status = proxy._answer(self.command, self.path)
            if status is not None:
                self.send_response(status)
                self.send_header('Content-Length', '0')
                self.end_headers()
                return
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in HOP_BY_HOP}
            if body or self.command in ('PUT', 'POST'):
                headers['Content-Length'] = str(len(body))
            proxy.forwarded.append((self.command, self.path))
            upstream = http.client.HTTPConnection(*proxy.upstream,
                                                  timeout=60)
            try:
                upstream.request(self.command, self.path, body, headers)
                reply = upstream.getresponse()
                content = reply.read()
            finally:
                upstream.close()
            if proxy._take(self.command, self.path):
                proxy.lost.append((self.command, self.path, reply.status))
                self.close_connection = True
                return
            self.send_response(reply.status, reply.reason)
            for name, value in reply.getheaders():
                if name.lower() not in HOP_BY_HOP + ('content-length',):
                    self.send_header(name, value)
            if self.command == 'HEAD':
                length = reply.getheader('Content-Length')
            else:
                length = None if reply.status in (204, 304) else len(content)
            if length is not None:
                self.send_header('Content-Length', str(length))
            self.end_headers()
            if self.command != 'HEAD':
                self.wfile.write(content)

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

    return Handler
