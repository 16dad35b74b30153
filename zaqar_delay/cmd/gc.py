"""``zaqar-delay-gc``: housekeeping for zaqar-delay message stores.

Zaqar 23's own ``zaqar-gc`` calls ``gc()`` on its storage pipeline, which
does not pass the call on to the data driver, so it cleans nothing. This
command reads the same ``zaqar.conf`` and calls the data driver's ``gc()``
(every pool's, with pooling: Zaqar's pooling driver passes ``gc()`` to the
pipeline in front of each pool's driver, which drops it too): expired
claims are redelivered, due messages promoted, expired messages removed,
and dead-letter moves that a crashed API node left half done are finished.
Several hosts may run it at once: on Redis and MongoDB every step is atomic
in the store; on Swift one pass runs at a time per account (a lease in
Swift), and a pass that finds another running logs who holds it and skips
(``--once`` exits with status 3), the daemon trying again a
full_scan_time later. It
also removes what retention no longer keeps (driver.clean_queue), paced by
the [retention] options tuples_per_iteration, iteration_delay and
full_scan_time, each of which a flag of the same name overrides. A queue
that fails is logged and skipped; a store outage is logged and retried with
backoff, never the end of the daemon.
"""

import functools
import sys
import time

from oslo_config import cfg
from oslo_log import log as logging
from zaqar import bootstrap
from zaqar.storage import pooling

from zaqar_delay import conf as zd_conf
from zaqar_delay import driver
from zaqar_delay import errors
from zaqar_delay.conf import retention

LOG = logging.getLogger(__name__)

# --once: the status when another pass held the store's gc lease (Swift).
EXIT_ANOTHER_PASS_RUNNING = 3


def _pacing_flag(option, **kwargs):
    """A flag for a [retention] daemon option: unset, the option's value
    (from zaqar.conf, else its default) holds."""
    return type(option)(
        option.name, default=None, min=option.type.min, max=option.type.max,
        help=option.help + ' Default: [retention] ' + option.name + '.',
        **kwargs)


CLI_OPTS = [
    cfg.BoolOpt('once', default=False,
                help='Run one pass over every queue, then exit (with status '
                     '1 if the pass failed).'),
    # --interval was the pause between passes; a pace is the better knob
    # (a slow pass is not followed by a full pause), so it now sets it.
    _pacing_flag(retention.full_scan_time, deprecated_name='interval'),
    _pacing_flag(retention.tuples_per_iteration),
    _pacing_flag(retention.iteration_delay),
    cfg.BoolOpt('verbose', default=False,
                help='Print one line per pass: queues visited, expired '
                     'messages removed, messages removed by retention, '
                     'seconds taken and messages removed per second.'),
    cfg.PortOpt('metrics_port',
                help='Serve Prometheus metrics of the store and of the gc '
                     'passes on this port (GET /metrics; needs the '
                     'prometheus extra). A snapshot is taken after each '
                     'pass; scrapes never reach the store. Default: off.'),
    cfg.StrOpt('metrics_address', default='127.0.0.1',
               help='Address the metrics are served on (0.0.0.0: every '
                    'interface). The metrics name projects and queues.'),
    cfg.IntOpt('metrics_max_queues', default=100, min=0,
               help='Export per-queue metrics for at most this many queues '
                    '(the first in project, queue order); the others are '
                    'only counted, in zaqar_delay_queues{exported="false"}.'),
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
    pacing = _apply_pacing_flags(conf)
    store = bootstrap.Bootstrap(conf).storage._storage
    exporter = _serve_metrics(conf, pacing)
    failures = passes = 0
    while True:
        started = time.monotonic()
        try:
            result = gc_pass(store)
        except errors.GcPassRunning as exc:
            # Not a failure: another host's pass is doing the work.
            LOG.warning('%s', exc)
            if exporter:
                exporter.record_deferred()
            if conf.once:
                return EXIT_ANOTHER_PASS_RUNNING
            time.sleep(pacing.full_scan_time)
            continue
        except Exception as exc:
            if exporter:
                exporter.record_failure(exc)
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
        passes += 1
        seconds = time.monotonic() - started
        report = _report(passes, result, seconds)
        LOG.info('%s', report)
        if conf.verbose:
            print(report, flush=True)
        if exporter:
            exporter.record_pass(result, seconds)
            exporter.refresh(pool_stores(store), conf.metrics_max_queues)
        if conf.once:
            return 0
        # Pace the passes: a pass that took less than full_scan_time waits
        # out the rest, a slower one is followed by the next at once.
        time.sleep(max(0.0, pacing.full_scan_time - seconds))


def _serve_metrics(conf, pacing):
    """The Exporter serving --metrics_port, or None when it is not set."""
    if conf.metrics_port is None:
        return None
    try:
        from zaqar_delay import exporter
    except ImportError as exc:
        raise SystemExit('--metrics_port needs prometheus_client: pip '
                         'install "zaqar-delay[prometheus]" ({})'.format(exc))
    served = exporter.Exporter(interval=pacing.full_scan_time)
    port = served.serve(conf.metrics_port, conf.metrics_address)
    LOG.info('metrics served on http://%s:%d/metrics', conf.metrics_address,
             port)
    return served


def _apply_pacing_flags(conf):
    """Let the flags that were given override [retention] (which the data
    driver reads); return the [retention] group."""
    zd_conf.register(conf, retention)
    for option in retention.DAEMON_OPTS:
        value = conf[option.name]
        if value is not None:
            conf.set_override(option.name, value, group=retention.GROUP_NAME)
    return conf[retention.GROUP_NAME]


def _report(number, result, seconds):
    """One line on what a pass did (``result``: driver.GcPass; a store
    whose gc() reports nothing, as Zaqar's pooling driver, gets times
    only)."""
    if result is None:
        return 'gc pass {} done in {:.2f} s'.format(number, seconds)
    return ('gc pass {}: {} queues ({} skipped), {} expired removed, {} '
            'removed by retention, {:.2f} s, {:.1f} messages/s').format(
                number, result.queues, result.skipped, result.expired,
                result.retention, seconds, result.removed / seconds if seconds
                else 0.0)


def gc_pass(store):
    """One pass: the data driver's ``gc()``, or with pooling each pool's.

    A pool that fails is logged and skipped, so one pool's outage does not
    stop gc of the others; the pass then fails with that pool's error once
    every pool had its turn."""
    if not isinstance(store, pooling.DataDriver):
        return _exclusive_gc(store)
    total, failed = driver.GcPass(), []
    for pool, get_store in pool_stores(store):
        try:
            result = _exclusive_gc(get_store())
        except Exception as exc:
            LOG.error('gc of pool %s failed: %s', pool, exc)
            failed.append(exc)
            continue
        if result is not None:
            total.add(result)
    if failed:
        raise failed[0]
    return total


def _exclusive_gc(store):
    """One pass that reports another host's pass (errors.GcPassRunning)
    instead of passing over it quietly as Zaqar's gc() hook does; a data
    driver that is not ours has only gc()."""
    return getattr(store, 'exclusive_gc', store.gc)()


def pool_stores(store):
    """[(pool name, a function returning its data driver)]; without
    pooling, the store itself under the name None."""
    if not isinstance(store, pooling.DataDriver):
        return [(None, lambda: store)]
    catalog = store._pool_catalog
    return [(pool['name'], functools.partial(_pool_driver, catalog,
                                             pool['name']))
            for pool in next(catalog._pools_ctrl.list(limit=0))]


def _pool_driver(catalog, name):
    return catalog.get_driver(name)._storage


if __name__ == '__main__':
    sys.exit(main())
