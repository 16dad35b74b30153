"""Zaqar's WSGI v2 test suites (messages, claims, queue lifecycle) on each
of our drivers, through Zaqar's real WSGI app.

Zaqar names these classes after MongoDB, its reference store; only their
tearDowns touch MongoDB directly, so those are replaced by the conftest's
wipe of our stores. Expected failures are listed in ``expected.py``.
"""

from zaqar.tests.unit.transport.wsgi import base
from zaqar.tests.unit.transport.wsgi.v2_0 import test_claims
from zaqar.tests.unit.transport.wsgi.v2_0 import test_messages
from zaqar.tests.unit.transport.wsgi.v2_0 import test_queue_lifecycle

from tests.factories import BACKENDS
from tests.zaqar_suites import expected
from tests.zaqar_suites import zaqar_drivers

SUITES = {
    'WsgiMessages': test_messages.TestMessagesMongoDB,
    'WsgiClaims': test_claims.TestClaimsMongoDB,
    'WsgiQueueLifecycle': test_queue_lifecycle.TestQueueLifecycleMongoDB,
}


def _tear_down(self):
    # Zaqar's tearDowns drop MongoDB databases; the conftest wipes ours.
    base.V2Base.tearDown(self)


def _attributes(backend, suite):
    # The messages suite's tearDown deletes its queues over the API: kept.
    return {} if suite == 'WsgiMessages' else {'tearDown': _tear_down}


expected.define(globals(), list(BACKENDS) + zaqar_drivers.COMPARED, SUITES,
                _attributes)
