"""python-swiftclient connections that read the process environment once.

swiftclient sends every request through a ``requests`` session that
trusts the environment, and such a session looks up the proxy settings
for each request: ``urllib.request.getproxies_environment`` walks all of
``os.environ``, twice a request, plus a ``.netrc`` lookup. That was
about a fifth of this driver's own CPU per Swift request
(``python -m benchmarks.swift_calls`` prints it; docs/performance.md).
The environment does not change under a running server, and each
connection talks to one storage URL, so its proxies and CA bundle are
resolved when the connection is made (swiftclient makes it again after
a dropped connection or a re-authentication), and its session then
stops reading the environment. What the environment asks for still
applies (``http_proxy``, ``https_proxy``, ``no_proxy``,
``REQUESTS_CA_BUNDLE``, ``CURL_CA_BUNDLE``); ``.netrc`` credentials are
no longer sent with storage requests, which carry a token (swiftclient's
v1 auth request still reads them).
"""

import swiftclient


class Connection(swiftclient.Connection):

    def http_connection(self, url=None):
        parsed, connection = super().http_connection(url)
        read_environment_once(connection)
        return parsed, connection


def read_environment_once(connection):
    """Fix what the environment asks of ``connection`` (a swiftclient
    HTTPConnection) for its storage URL, then stop its session reading
    the environment on each request."""
    session, args = connection.request_session, connection.requests_args
    settled = session.merge_environment_settings(
        connection.url, dict(args.get('proxies') or {}), args.get('stream'),
        args.get('verify'), args.get('cert'))
    args['proxies'] = settled['proxies']
    args['verify'] = settled['verify']
    session.trust_env = False
