from urllib import parse

from localstack import backends

GROUP = 'drivers:message_store:delay.swift'

# Which spare account of the test Swift the running test uses (None: the
# server's first account). A gc pass visits every queue of its account,
# so tests sharing one account would each pay for every queue the
# earlier ones left; taking the spare accounts in turn divides that.
_turn = None


def next_account():
    """Move the tests of this process to the next spare account."""
    global _turn
    _turn = 0 if _turn is None else _turn + 1


def account_user(server):
    """(user, key) of the account the running test uses."""
    if _turn is None:
        return server.user, server.key
    return server.spare_user(_turn)


def swift_uri(server, user=None, key=None):
    """``delay.swift://`` URI of a test server's tempauth (v1) account:
    the running test's own unless ``user`` names another."""
    if user is None:
        user, key = account_user(server)
    return 'delay.swift://{}:{}@127.0.0.1:{}/auth/v1.0?auth=v1'.format(
        parse.quote(user, safe=''), parse.quote(key, safe=''),
        server.proxy_port)


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
