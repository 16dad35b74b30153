"""oslo.config options of zaqar-delay, one module per option group.

``oslo-config-generator --namespace zaqar_delay`` lists them through
:func:`list_opts`.
"""

from zaqar_delay.conf import limits
from zaqar_delay.conf import mongodb
from zaqar_delay.conf import redis
from zaqar_delay.conf import retention
from zaqar_delay.conf import swift

OPTION_MODULES = (limits, mongodb, redis, retention, swift)


def list_opts():
    return [(module.GROUP_NAME, getattr(module, 'LISTED_OPTS',
                                        module.ALL_OPTS))
            for module in OPTION_MODULES]


def register(conf, *modules):
    """Register the option groups of ``modules`` on ``conf`` (idempotent)."""
    for module in modules:
        conf.register_opts(module.ALL_OPTS, group=module.GROUP_NAME)
