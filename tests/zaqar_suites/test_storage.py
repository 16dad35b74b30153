"""Zaqar's storage-controller test suites on each of our drivers.

Each of Zaqar's ``zaqar.tests.unit.storage.base`` suites (queue, message,
claim, subscription) runs unchanged against every zaqar-delay backend. The
few tests that cannot hold by design are listed in ``expected.py`` with the
reason, and run as strict expected failures: if one starts to pass, the
list is wrong and the run fails.
"""

from zaqar.storage.mongodb import driver as zaqar_mongodb
from zaqar.storage.mongodb import queues as zaqar_mongodb_queues
from zaqar.tests.unit.storage import base

from tests.zaqar_suites import expected
from tests.zaqar_suites import zaqar_drivers
from zaqar_delay.drivers.mongodb import driver as mongodb_driver
from zaqar_delay.drivers.redis import driver as redis_driver
from zaqar_delay.drivers.swift import driver as swift_driver

DRIVERS = {
    'redis': redis_driver.DataDriver,
    'mongodb': mongodb_driver.DataDriver,
    'swift': swift_driver.DataDriver,
}


class ControlQueueController(zaqar_mongodb_queues.QueueController):
    """Zaqar's MongoDB queue controller (its reference management store),
    built from our data driver: queues live in the control driver, as in a
    deployment."""

    def __init__(self, data_driver):
        super().__init__(data_driver.control_driver)


SUITES = {
    'Queues': base.QueueControllerTest,
    'Messages': base.MessageControllerTest,
    'Claims': base.ClaimControllerTest,
    'Subscriptions': base.SubscriptionControllerTest,
}


def _controller(backend, suite):
    if suite == 'Queues':
        return ControlQueueController
    name = suite[:-1] + 'Controller'
    if backend.startswith('zaqar-'):
        return getattr(zaqar_drivers.storage(backend[6:])[1], name)
    return getattr(DRIVERS[backend], {
        'MessageController': 'MESSAGE_CONTROLLER',
        'ClaimController': 'CLAIM_CONTROLLER',
        'SubscriptionController': 'SUBSCRIPTION_CONTROLLER'}[name])


def _attributes(backend, suite):
    return {
        'driver_class': (zaqar_drivers.storage(backend[6:])[0]
                         if backend.startswith('zaqar-')
                         else DRIVERS[backend]),
        'controller_class': _controller(backend, suite),
        'control_driver_class': zaqar_mongodb.ControlDriver,
        # Expired messages vanish from reads at once, and gc() removes
        # them; Zaqar's suite waits this long before checking.
        'gc_interval': 1,
    }


expected.define(globals(), list(DRIVERS) + zaqar_drivers.COMPARED, SUITES,
                _attributes)
