"""Zaqar's WSGI v2 test suites whose requests reach the message store, on
each of our drivers, through Zaqar's real WSGI app.

Zaqar names these classes after MongoDB, its reference store; only their
tearDowns touch MongoDB directly, so those are replaced by the conftest's
wipe of our stores. Expected failures are listed in ``expected.py``.

Left out, as they never reach a message store: ``test_auth`` (Keystone
middleware), ``test_home``, ``test_media_type`` (refused before routing),
``test_urls`` (signing only), and the pools and flavors suites (the
management store's, under pooling: tests/pooling runs those).
"""

from zaqar.tests.unit.transport.wsgi import base
from zaqar.tests.unit.transport.wsgi.v2_0 import test_claims
from zaqar.tests.unit.transport.wsgi.v2_0 import test_default_limits
from zaqar.tests.unit.transport.wsgi.v2_0 import test_health
from zaqar.tests.unit.transport.wsgi.v2_0 import test_messages
from zaqar.tests.unit.transport.wsgi.v2_0 import test_ping
from zaqar.tests.unit.transport.wsgi.v2_0 import test_purge
from zaqar.tests.unit.transport.wsgi.v2_0 import test_queue_lifecycle
from zaqar.tests.unit.transport.wsgi.v2_0 import test_subscriptions
from zaqar.tests.unit.transport.wsgi.v2_0 import test_topic_lifecycle
from zaqar.tests.unit.transport.wsgi.v2_0 import test_validation

from localstack.factories import BACKENDS
from tests.zaqar_suites import expected
from tests.zaqar_suites import zaqar_drivers

SUITES = {
    'WsgiMessages': test_messages.TestMessagesMongoDB,
    'WsgiClaims': test_claims.TestClaimsMongoDB,
    'WsgiQueueLifecycle': test_queue_lifecycle.TestQueueLifecycleMongoDB,
    'WsgiPurge': test_purge.TestPurge,
    'WsgiSubscriptions': test_subscriptions.TestSubscriptionsMongoDB,
    'WsgiValidation': test_validation.TestValidation,
    'WsgiDefaultLimits': test_default_limits.TestDefaultLimits,
    'WsgiHealth': test_health.TestHealthMongoDB,
    'WsgiPing': test_ping.TestPing,
    'WsgiTopicLifecycle': test_topic_lifecycle.TestTopicLifecycleMongoDB,
}

# Suites whose tearDown only drops Zaqar's MongoDB databases (the others
# delete their queues over the API, which is kept).
_MONGODB_TEARDOWNS = {'WsgiClaims', 'WsgiQueueLifecycle', 'WsgiHealth',
                      'WsgiTopicLifecycle'}


def _tear_down(self):
    # Zaqar's tearDowns drop MongoDB databases; the conftest wipes ours.
    base.V2Base.tearDown(self)


def _attributes(backend, suite):
    return {'tearDown': _tear_down} if suite in _MONGODB_TEARDOWNS else {}


expected.define(globals(), list(BACKENDS) + zaqar_drivers.COMPARED, SUITES,
                _attributes)
