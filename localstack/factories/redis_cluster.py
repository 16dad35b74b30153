"""The Redis driver on a real 3-master Redis Cluster (``?cluster=true``).

Queue metadata stays in Zaqar's own single-node Redis control driver. Only
the contract suite runs on this backend (see tests/contract/conftest.py);
it is not in ``BACKENDS``, so the integration and Zaqar suites do not.
"""

from localstack import backends


def make_driver(request, conf):
    from zaqar_delay.drivers.redis import driver
    conf.set_override('uri', request.getfixturevalue('redis_cluster_url'),
                      group='drivers:message_store:delay.redis')
    return driver.DataDriver(
        conf, None,
        backends.control_driver(conf, request.getfixturevalue('redis_url')))


def zaqar_store(request):
    """(message_store name, its zaqar.conf options) for Zaqar itself."""
    return 'delay.redis', {
        'uri': request.getfixturevalue('redis_cluster_url')}
