from urllib import parse

from localstack import backends

GROUP = 'drivers:message_store:delay.swift'


def swift_uri(server, user=None, key=None):
    """``delay.swift://`` URI of a test server's tempauth (v1) account."""
    return 'delay.swift://{}:{}@127.0.0.1:{}/auth/v1.0?auth=v1'.format(
        parse.quote(user or server.user, safe=''),
        parse.quote(key or server.key, safe=''), server.proxy_port)


def make_driver(request, conf):
    from zaqar_delay.drivers.swift import driver
    server = request.getfixturevalue('swift_server')
    redis_url = request.getfixturevalue('redis_url')
    conf.set_override('uri', swift_uri(server), group=GROUP)
    return driver.DataDriver(conf, None,
                             backends.control_driver(conf, redis_url))


def zaqar_store(request):
    """(message_store name, its zaqar.conf options) for Zaqar itself."""
    server = request.getfixturevalue('swift_server')
    return 'delay.swift', {'uri': swift_uri(server)}


class TempauthClient:
    """Stands in for Zaqar's Swift client wrapper, which speaks only
    Keystone: the same swiftclient calls, authenticated once with tempauth
    (v1) on the benchmark's own Swift."""

    def __init__(self, server):
        import swiftclient
        self._swiftclient = swiftclient
        self._url, self._token = server.get_auth()

    def __getattr__(self, name):
        connection = self._swiftclient.Connection(
            preauthurl=self._url, preauthtoken=self._token)
        return getattr(connection, name)
