"""``zaqar-delay-gc``: housekeeping for zaqar-delay message stores.

Zaqar 23's own ``zaqar-gc`` calls ``gc()`` on its storage pipeline, which
does not pass the call on to the data driver, so it cleans nothing. This
command reads the same ``zaqar.conf`` and calls the data driver's ``gc()``
(every pool's, with pooling: Zaqar's pooling driver passes ``gc()`` to the
pipeline in front of each pool's driver, which drops it too): expired
claims are redelivered, due messages promoted, expired messages removed,
and dead-letter moves that a crashed API node left half done are finished.
Every step is atomic in the store, so several hosts may run it at once. A
queue that fails is logged and skipped; a store outage is logged and
retried with backoff, never the end of the daemon.
"""

import time

from oslo_config import cfg
from oslo_log import log as logging
from zaqar import bootstrap
from zaqar.storage import pooling

LOG = logging.getLogger(__name__)

CLI_OPTS = [
    cfg.BoolOpt('once', default=False,
                help='Run one pass over every queue, then exit (with status '
                     '1 if the pass failed).'),
    cfg.IntOpt('interval', default=60, min=1,
               help='Seconds to sleep between passes when not --once.'),
    cfg.IntOpt('max_backoff', default=300, min=1,
               help='After a failed pass (the store unreachable), the next '
                    'one is tried after 1 s, then 2, 4, ... seconds, at most '
                    'this many, until a pass succeeds.'),
]


def main(argv=None):
    conf = cfg.ConfigOpts()
    conf.register_cli_opts(CLI_OPTS)
    logging.register_options(conf)
    conf(argv, project='zaqar', prog='zaqar-delay-gc')
    logging.setup(conf, 'zaqar-delay-gc')
    store = bootstrap.Bootstrap(conf).storage._storage
    failures = 0
    while True:
        started = time.monotonic()
        try:
            removed = gc_pass(store)
        except Exception as exc:
            # The driver's gc() isolates queues (driver.gc_each): what
            # reaches here is the store itself failing. Report it and try
            # again later, never exit.
            failures += 1
            pause = min(2 ** (failures - 1), conf.max_backoff)
            LOG.error('gc pass failed (%d in a row): %s; next try in %d s',
                      failures, exc, pause)
            if conf.once:
                return 1
            time.sleep(pause)
            continue
        if failures:
            LOG.warning('gc pass succeeded after %d failed passes', failures)
            failures = 0
        LOG.info('gc pass done in %.2f s, %s expired messages removed',
                 time.monotonic() - started, removed)
        if conf.once:
            return 0
        time.sleep(conf.interval)


def gc_pass(store):
    """One pass: the data driver's ``gc()``, or with pooling each pool's.

    A pool that fails is logged and skipped, so one pool's outage does not
    stop gc of the others; the pass then fails with that pool's error once
    every pool had its turn."""
    if not isinstance(store, pooling.DataDriver):
        return store.gc()
    catalog = store._pool_catalog
    removed, failed = 0, []
    for pool in next(catalog._pools_ctrl.list(limit=0)):
        try:
            removed += catalog.get_driver(pool['name'])._storage.gc() or 0
        except Exception as exc:
            LOG.error('gc of pool %s failed: %s', pool['name'], exc)
            failed.append(exc)
    if failed:
        raise failed[0]
    return removed
