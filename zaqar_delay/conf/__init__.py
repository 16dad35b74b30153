"""oslo.config options of zaqar-delay, one module per option group.

``oslo-config-generator --namespace zaqar_delay`` lists them through
:func:`list_opts`.
"""

import types

from oslo_log import log as logging

from zaqar_delay.conf import limits
from zaqar_delay.conf import mongodb
from zaqar_delay.conf import redis
from zaqar_delay.conf import retention
from zaqar_delay.conf import swift

LOG = logging.getLogger(__name__)

OPTION_MODULES = (limits, mongodb, redis, retention, swift)


def list_opts():
    return [(module.GROUP_NAME, getattr(module, 'LISTED_OPTS',
                                        module.ALL_OPTS))
            for module in OPTION_MODULES]


def register(conf, *modules):
    """Register the option groups of ``modules`` on ``conf`` (idempotent)."""
    for module in modules:
        conf.register_opts(module.ALL_OPTS, group=module.GROUP_NAME)


def snapshot(conf, module, given=None):
    """The values of ``module``'s options as they are now, or as ``given``
    ({name: value}, a pool's registered options) names them, each checked
    against our own definition of the option.

    Drivers take their values once, when they are built: Zaqar's pooling
    builds every pool's driver from one shared configuration whose group it
    overrides with that pool's URI and options just before, so a value read
    later could be another pool's. An option that Zaqar registered first
    (``storage.utils.dynamic_conf`` registers the group from the first
    pool's options, typed by their JSON values) has neither our type nor our
    bounds, so every value goes through our option's type here."""
    group = conf[module.GROUP_NAME]
    given = given or {}
    values = {}
    for opt in module.ALL_OPTS:
        value = given[opt.dest] if opt.dest in given else group[opt.dest]
        if value is not None:
            try:
                value = opt.type(value)
            except ValueError as exc:
                raise ValueError('[{}] {} = {!r} is refused: {}'.format(
                    module.GROUP_NAME, opt.dest, value, exc)) from None
        values[opt.dest] = value
    return types.SimpleNamespace(**values)


def release_pool(conf, module):
    """Pooling: once a pool's driver took its values, put ``module``'s
    group back to what zaqar.conf says, so the next pool's driver starts
    from there rather than from this pool's options (``dynamic_conf`` only
    overrides the options a pool names, and would otherwise leave the
    others at the previous pool's values)."""
    group = module.GROUP_NAME
    for name in list(conf[group]):
        conf.clear_override(name, group=group)
    # An option Zaqar registered first has the first pool's value as its
    # default: give it ours.
    for opt in module.ALL_OPTS:
        try:
            conf.set_default(opt.dest, opt.default, group=group)
        except ValueError:
            LOG.warning('[%s] %s: a pool gave it a value of another type '
                        'first; pools that do not set it inherit that value',
                        group, opt.dest)
