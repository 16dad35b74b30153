"""Zaqar's own drivers on the same servers, to compare conformance counts.

Only ``tools/conformance.py`` asks for these (``ZAQAR_DELAY_COMPARE=1``):
they show which of Zaqar's tests its own driver on the same backend fails
too. Zaqar's MongoDB driver runs on mongomock (no server here) and its
Swift driver, which speaks only Keystone, gets a tempauth client, as in
localstack/factories.
"""

import os

from localstack.factories import BACKENDS

COMPARED = (['zaqar-' + name for name in BACKENDS]
            if os.environ.get('ZAQAR_DELAY_COMPARE') else [])


def storage(backend):
    """(Zaqar's data driver class, its controllers module) for Zaqar's
    storage suites; the Swift and MongoDB patches come from ``store``."""
    if backend == 'redis':
        from zaqar.storage.redis import controllers, driver
    elif backend == 'mongodb':
        from zaqar.storage.mongodb import controllers, driver
    else:
        from zaqar.storage.swift import controllers, driver
    return driver.DataDriver, controllers


def store(backend, request, redis_url, monkeypatch):
    if backend == 'redis':
        return 'redis', {'uri': redis_url}
    if backend == 'mongodb':
        from zaqar.storage.mongodb import driver as zaqar_mongodb
        from localstack.factories import mongodb as mongodb_factory
        client = mongodb_factory.StandaloneView(
            mongodb_factory.mongomock_client_factory()(None))
        monkeypatch.setattr(zaqar_mongodb, '_connection', lambda conf: client)
        return 'mongodb', {'uri': 'mongodb://127.0.0.1:27017',
                           'database': 'zaqar_compare'}
    if backend == 'swift':
        from zaqar.storage.swift import driver as zaqar_swift
        from localstack.factories import swift as swift_factory
        server = request.getfixturevalue('swift_server')
        monkeypatch.setattr(zaqar_swift.DataDriver, 'connection', property(
            lambda self: swift_factory.TempauthClient(server)))
        return 'swift', {'uri': swift_factory.swift_uri(server).replace(
            'delay.swift', 'swift')}
    raise ValueError(backend)
