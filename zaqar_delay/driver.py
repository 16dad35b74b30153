"""What every zaqar-delay data driver shares.

A backend's driver names its option module and its three controller
classes; this base registers the options (the backend's and the shared
limits), builds each controller once, and reports health the same way.
"""

from zaqar.common import decorators
from zaqar.storage import base as storage

from zaqar_delay import conf as zd_conf
from zaqar_delay.conf import limits


class DataDriver(storage.DataDriverBase):

    # Set by each backend.
    OPTIONS = None
    MESSAGE_CONTROLLER = None
    CLAIM_CONTROLLER = None
    SUBSCRIPTION_CONTROLLER = None

    def __init__(self, conf, cache, control_driver):
        super().__init__(conf, cache, control_driver)
        zd_conf.register(conf, self.OPTIONS, limits)
        self.store_conf = conf[self.OPTIONS.GROUP_NAME]

    @classmethod
    def driver_options(cls, options):
        """``_DRIVER_OPTIONS`` for a backend whose option module is
        ``options`` (Zaqar registers these before ``__init__`` runs)."""
        return [(options.GROUP_NAME, options.ALL_OPTS),
                (limits.GROUP_NAME, limits.ALL_OPTS)]

    @property
    def capabilities(self):
        return self.BASE_CAPABILITIES

    def _health(self):
        return {'storage_reachable': self.is_alive(),
                'operation_status': self._get_operation_status()}

    @decorators.lazy_property(write=False)
    def message_controller(self):
        return self.MESSAGE_CONTROLLER(self)

    @decorators.lazy_property(write=False)
    def claim_controller(self):
        return self.CLAIM_CONTROLLER(self)

    @decorators.lazy_property(write=False)
    def subscription_controller(self):
        return self.SUBSCRIPTION_CONTROLLER(self)
