"""How the tests build each backend's data driver.

Each backend is a name and a factory; the contract suite runs once per
backend. Queue metadata lives in Zaqar's own Redis control driver for every
backend, as it would in a deployment that keeps metadata apart from messages.
"""

import time

from oslo_config import cfg
from oslo_log import log
from osprofiler import opts as profiler_opts
from zaqar import conf as zaqar_conf
from zaqar.storage.redis import driver as zaqar_redis

from zaqar_delay import conf as zd_conf


def make_conf(config_files=(), **groups):
    """A Zaqar configuration read from ``config_files`` (for sections that
    only files can add, such as ``[retention:<queue>]``), with ``groups``
    ({group: {opt: value}}) set."""
    conf = cfg.ConfigOpts()
    zaqar_conf.configure(conf)
    log.register_options(conf)
    profiler_opts.set_defaults(conf)
    for group, options in zd_conf.list_opts():
        conf.register_opts(options, group=group)
    conf([arg for path in config_files
          for arg in ('--config-file', str(path))], project='zaqar')
    # The suite and the benchmarks claim and list bigger batches than
    # Zaqar's default bound of 20; test_bounds.py tests the bounds.
    groups = dict({'transport': {'max_messages_per_claim_or_pop': 1000,
                                 'max_messages_per_page': 1000}}, **groups)
    for group, values in groups.items():
        for name, value in values.items():
            conf.set_override(name, value, group=group)
    return conf


def control_driver(conf, redis_url):
    conf.set_override('uri', redis_url,
                      group='drivers:management_store:redis')
    return zaqar_redis.ControlDriver(conf, None)


class FakeClock:
    """Epoch milliseconds that only move when a test says so."""

    def __init__(self):
        self.now_ms = int(time.time() * 1000)

    def __call__(self):
        return self.now_ms

    def advance(self, seconds):
        self.now_ms += int(seconds * 1000)
