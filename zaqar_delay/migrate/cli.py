"""The ``zaqar-delay-migrate`` command: reads zaqar.conf as Zaqar does
(its ``message_store`` must be a zaqar-delay driver: the target), opens
the old store named by ``--source-uri`` with Zaqar's own driver, and moves
the selected queues one by one. With pooling, ``pools`` does the same per
pool."""

import sys

from oslo_config import cfg
from oslo_log import log as logging
from zaqar import bootstrap
from zaqar.storage import errors as storage_errors
from zaqar.storage import pooling

from zaqar_delay import driver as zd_driver
from zaqar_delay import errors
from zaqar_delay.migrate import mover
from zaqar_delay.migrate import pools
from zaqar_delay.migrate import progress
from zaqar_delay.migrate import queues
from zaqar_delay.migrate import sources

LOG = logging.getLogger(__name__)

CLI_OPTS = [
    cfg.StrOpt('source-uri', secret=True,
               help='The old message store to move from: a redis://, '
                    'mongodb:// or swift:// URI, read with Zaqar\'s own '
                    'driver of that name and its '
                    '[drivers:message_store:<name>] options (a swift:// URI '
                    'ending in ?auth=v1 speaks tempauth instead of '
                    'Keystone).'),
    cfg.MultiStrOpt('project-id', default=[],
                    help='Move only the queues of this project (repeat for '
                         'more; "" is Zaqar\'s global project). Default: '
                         'every project of the management store.'),
    cfg.MultiStrOpt('queue', default=[],
                    help='Move only the queue of this name (repeat for '
                         'more). Default: every queue.'),
    cfg.MultiStrOpt('pool', default=[],
                    help='With pooling: move only the queues of this pool '
                         '(repeat for more). Default: every pool.'),
    cfg.MultiStrOpt('pool-source', default=[], secret=True,
                    help='With pooling: NAME=URI, the old store (Zaqar\'s '
                         'own redis://, mongodb:// or swift://) of pool '
                         'NAME, whose registered URI names the zaqar-delay '
                         'store to move into. One per selected pool.'),
    cfg.IntOpt('batch', default=100, min=1, max=1000,
               help='Messages read, stored and verified per step.'),
    cfg.BoolOpt('dry-run', default=False,
                help='Count what would move (messages, expired ones, '
                     'subscriptions) and change nothing.'),
    cfg.BoolOpt('upgrade-layout', default=False,
                help='Instead of a move: bring the message_store that '
                     'zaqar.conf names, written by an earlier version of '
                     'zaqar-delay, to the layout this version reads (its '
                     'driver refuses to start until then). Batched; safe '
                     'to kill and run again.'),
    cfg.BoolOpt('delete-source', default=False,
                help='After the move, delete from the source every message '
                     'whose copy was read back from the target with the '
                     'same body. Off: the source is left as it was, for a '
                     'roll-back.'),
]


def main(argv=None, out=sys.stdout):
    conf = cfg.ConfigOpts()
    conf.register_cli_opts(CLI_OPTS)
    logging.register_options(conf)
    conf(argv, project='zaqar', prog='zaqar-delay-migrate')
    logging.setup(conf, 'zaqar-delay-migrate')
    if conf.dry_run and conf.delete_source:
        sys.exit('--dry-run and --delete-source exclude each other')
    if conf.upgrade_layout:
        moving = [name for name, given in (
            ('--dry-run', conf.dry_run), ('--delete-source',
                                          conf.delete_source),
            ('--source-uri', conf.source_uri), ('--queue', conf.queue),
            ('--project-id', conf.project_id), ('--pool', conf.pool),
            ('--pool-source', conf.pool_source)) if given]
        if moving:
            # The upgrade works on the whole store, and has no dry run.
            sys.exit('--upgrade-layout takes none of the move\'s options: '
                     '{}'.format(', '.join(moving)))
    try:
        store = bootstrap.Bootstrap(conf).storage._storage
        if conf.upgrade_layout:
            return upgrade_layout(_ours(store, conf), out)
        if isinstance(store, pooling.DataDriver):
            return run_pools(conf, store, out)
        target = _ours(store, conf)
        source = sources.open_source(conf, conf.source_uri,
                                     target.control_driver)
        selected = list(queues.selected(target.control_driver,
                                        _projects(conf), conf.queue))
        _check_names(conf.queue, selected)
    except errors.InvalidInput as exc:
        sys.exit(str(exc))
    return run(conf, source, target, out, selected)


def _check_names(names, selected, where='projects'):
    """A ``--queue`` that names no selected queue is a typo: refused
    before anything moves, rather than a run that moves nothing and
    says all went well."""
    missing = sorted(set(names) - {queue for _, queue in selected})
    if missing:
        raise errors.InvalidInput(
            '--queue names no queue of the selected {}: {}; nothing '
            'moved'.format(where, ', '.join(missing)))


def _projects(conf):
    """--project-id values; "" is Zaqar's global project (None)."""
    return [project or None for project in conf.project_id]


def upgrade_layout(target, out):
    target.check_layout = False
    try:
        target.upgrade_layout(progress.Progress(0, out).say)
    except (errors.LayoutMismatch, errors.UnsupportedServer) as exc:
        sys.exit(str(exc))
    return 0


def _ours(store, conf):
    """The message_store zaqar.conf names (pooling off): the target."""
    if isinstance(store, pooling.DataDriver):
        raise errors.InvalidInput(
            'pooling is on: --upgrade-layout works on one store; run it '
            'per pool with a zaqar.conf that names the pool\'s store as '
            'message_store, pooling off')
    if conf.pool or conf.pool_source:
        raise errors.InvalidInput('--pool and --pool-source need pooling '
                                  '= true; name the old store with '
                                  '--source-uri')
    if not isinstance(store, zd_driver.DataDriver):
        raise errors.InvalidInput(
            'message_store = {} is not a zaqar-delay driver: set it to '
            'delay.redis, delay.mongodb or delay.swift, the store to move '
            'into'.format(conf.drivers.message_store))
    if not conf.source_uri and not conf.upgrade_layout:
        raise errors.InvalidInput(
            '--source-uri is required (or --upgrade-layout)')
    return store


def run_pools(conf, store, out):
    """Move (or count) pool by pool; 0 when every queue of every pool
    verified."""
    if conf.source_uri:
        raise errors.InvalidInput(
            'pooling is on: name each pool\'s old store with --pool-source '
            'NAME=URI instead of --source-uri')
    plan = pools.planned(store, conf.pool, pools.source_uris(
        conf.pool_source))
    chosen = [(pool, list(pool.selected(_projects(conf), conf.queue)))
              for pool in plan]
    _check_names(conf.queue, [pair for _, selected in chosen
                              for pair in selected], 'projects and pools')
    status = 0
    for pool, selected in chosen:
        # One pool at a time: a source driver reads its URI from the
        # shared [drivers:message_store:<kind>] section when it connects.
        source = sources.open_source(conf, pool.source_uri,
                                     pool.target.control_driver)
        print('pool {}:'.format(pool.name), file=out, flush=True)
        status |= run(conf, source, pool.target, out, selected)
    return status


def run(conf, source, target, out, selected):
    """Move (or count) every selected (project, queue); 0 when every one
    verified."""
    total = sum(source.count(queue, project) for project, queue in selected)
    # A move reads the source twice: once to move, once to verify.
    report = progress.Progress(total, out, passes=1 if conf.dry_run else 2)
    report.say('{} queues, {} messages in the source{}'.format(
        len(selected), total, ' (dry run)' if conf.dry_run else ''))
    work = mover.Mover(source, target, conf.batch, report)
    failed = 0
    for project, queue in selected:
        try:
            if conf.dry_run:
                done = work.count(queue, project)
            else:
                done = work.verify(queue, project, work.move(queue, project),
                                   delete=conf.delete_source)
        except storage_errors.QueueDoesNotExist:
            report.say('{}/{}: deleted meanwhile, skipped'.format(
                project or '', queue))
            continue
        report.say(done.line())
        for difference in done.differences:
            report.say('  ' + difference)
        failed += bool(done.difference_count)
    report.say('{} of {} queues with differences; {:.0f} messages/s'.format(
        failed, len(selected), report.rate()))
    return 1 if failed else 0
