"""``zaqar-delay-gc``: housekeeping for zaqar-delay message stores.

Zaqar 23's own ``zaqar-gc`` calls ``gc()`` on its storage pipeline, which
does not pass the call on to the data driver, so it cleans nothing. This
command reads the same ``zaqar.conf`` and calls the data driver's ``gc()``
(every pool's, with pooling): expired claims are redelivered, due messages
promoted, expired messages removed, and dead-letter moves that a crashed API
node left half done are finished. Every step is atomic in the store, so
several hosts may run it at once.
"""

import time

from oslo_config import cfg
from oslo_log import log as logging
from zaqar import bootstrap

LOG = logging.getLogger(__name__)

CLI_OPTS = [
    cfg.BoolOpt('once', default=False,
                help='Run one pass over every queue, then exit.'),
    cfg.IntOpt('interval', default=60, min=1,
               help='Seconds to sleep between passes when not --once.'),
]


def main(argv=None):
    conf = cfg.ConfigOpts()
    conf.register_cli_opts(CLI_OPTS)
    logging.register_options(conf)
    conf(argv, project='zaqar', prog='zaqar-delay-gc')
    logging.setup(conf, 'zaqar-delay-gc')
    store = bootstrap.Bootstrap(conf).storage._storage
    while True:
        started = time.monotonic()
        removed = store.gc()
        LOG.info('gc pass done in %.2f s, %s expired messages removed',
                 time.monotonic() - started, removed)
        if conf.once:
            return 0
        time.sleep(conf.interval)
