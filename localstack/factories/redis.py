from localstack import backends


def make_driver(request, conf):
    return driver_for(request.getfixturevalue('redis_url'), conf)


def driver_for(redis_url, conf=None):
    """A data driver on the redis-server at ``redis_url``, which holds its
    control store too."""
    from zaqar_delay.drivers.redis import driver
    conf = conf or backends.make_conf()
    conf.set_override('uri', redis_url.replace('redis://', 'delay.redis://'),
                      group='drivers:message_store:delay.redis')
    return driver.DataDriver(conf, None,
                             backends.control_driver(conf, redis_url))


def zaqar_store(request):
    """(message_store name, its zaqar.conf options) for Zaqar itself."""
    redis_url = request.getfixturevalue('redis_url')
    return 'delay.redis', {'uri': redis_url.replace('redis://',
                                                    'delay.redis://')}


def retried_post(driver, queue, project, client, *per_message):
    """Run post.lua as a retry of an earlier post would (the id checks
    on, the registry left alone): ``per_message`` is its 7 values per
    message (lua/post.lua)."""
    return driver.run_script('post', queue, project, client, '', '', '0',
                             *per_message)
