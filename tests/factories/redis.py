from tests import backends


def make_driver(request, conf):
    from zaqar_delay.drivers.redis import driver
    redis_url = request.getfixturevalue('redis_url')
    conf.set_override('uri', redis_url.replace('redis://', 'delay.redis://'),
                      group='drivers:message_store:delay.redis')
    return driver.DataDriver(conf, None,
                             backends.control_driver(conf, redis_url))


def zaqar_store(request):
    """(message_store name, its zaqar.conf options) for Zaqar itself."""
    redis_url = request.getfixturevalue('redis_url')
    return 'delay.redis', {'uri': redis_url.replace('redis://',
                                                    'delay.redis://')}
