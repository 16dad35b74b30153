"""What every zaqar-delay data driver shares.

A backend's driver names its option module and its three controller
classes; this base registers the options (the backend's and the shared
limits), builds each controller once, and reports health the same way.
"""

import dataclasses
import time

from oslo_config import cfg
from oslo_log import log as logging
from zaqar.common import decorators
from zaqar.storage import base as storage
from zaqar.storage import errors as storage_errors

from zaqar_delay import conf as zd_conf
from zaqar_delay import control_store
from zaqar_delay import errors
from zaqar_delay import metadata_copy
from zaqar_delay.conf import limits
from zaqar_delay.conf import retention as retention_options

LOG = logging.getLogger(__name__)

# Bounded steps (retention batches, settling steps) one visit of a queue
# takes in a gc pass; a queue with more is visited again once every other
# queue was, so one busy tenant cannot hold the pass (gc_each).
VISIT_STEPS = 10


@dataclasses.dataclass
class GcPass:
    """What one gc() pass did (zaqar-delay-gc --verbose prints it)."""

    queues: int = 0     # queues visited
    visits: int = 0     # visits, more than queues when one had more left
    skipped: int = 0    # of which failed (logged, left for the next pass)
    expired: int = 0    # expired messages removed
    retention: int = 0  # messages removed because retention no longer
                        # keeps them (each counted once, in stats too)
    seconds: float = 0.0

    @property
    def removed(self):
        return self.expired + self.retention

    def __int__(self):
        # The count gc() returned before it returned a GcPass, so that
        # "%d" log lines of callers keep working.
        return self.expired

    def add(self, other):
        """Add another pass's counts (one per pool, with pooling)."""
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name)
                    + getattr(other, field.name))


def pooled(conf):
    try:
        return bool(conf.pooling)
    except cfg.NoSuchOptError:
        return False


class DataDriver(storage.DataDriverBase):

    # Set by each backend.
    OPTIONS = None
    MESSAGE_CONTROLLER = None
    CLAIM_CONTROLLER = None
    SUBSCRIPTION_CONTROLLER = None

    # False only for zaqar-delay-migrate --upgrade-layout, which opens a
    # store of an earlier layout to upgrade it: the first use and gc's
    # passes then skip the version check.
    check_layout = True

    # The GcPass of the gc() in progress, which clean_queue adds to.
    _gc_pass = None
    # Set when the queue gc is visiting stopped at VISIT_STEPS with more.
    _visit_unfinished = False
    # The data store's copies of queue metadata (metadata_copy.py), if
    # the backend keeps them: see keep_metadata_copies.
    metadata_copies = None

    def __init__(self, conf, cache, control_driver):
        # Zaqar's base registers _DRIVER_OPTIONS, tolerating options that
        # its pooling registered first under the same names from a pool's
        # options; snapshot() applies our types and bounds to them.
        super().__init__(conf, cache, control_driver)
        pool = self._own_pool(conf) if pooled(conf) else None
        if pool is not None:
            # The pool's registration as it was written, over zaqar.conf:
            # the overrides in the shared section go first, as they may be
            # bent to the types Zaqar gave its options (an integer option
            # turns 2.5 into 2) or left over from another pool.
            zd_conf.release_pool(conf, self.OPTIONS)
            self.store_conf = zd_conf.snapshot(
                conf, self.OPTIONS,
                dict(pool.get('options') or {}, uri=pool['uri']))
        else:
            try:
                self.store_conf = zd_conf.snapshot(conf, self.OPTIONS)
            finally:
                if pooled(conf):
                    zd_conf.release_pool(conf, self.OPTIONS)
        # This driver's pool in Zaqar's catalogue (None without pooling, for
        # Zaqar's virtual pool, and for a pool being registered).
        self.pool_name = pool['name'] if pool else None
        zd_conf.register(conf, retention_options)
        self.retention_conf = conf[retention_options.GROUP_NAME]

    def keep_metadata_copies(self, copies):
        """Read queue metadata from ``copies`` (a metadata_copy.Copies of
        this data store), kept exact by watching the control driver's
        queue controller; not with pooling (see metadata_copy.py)."""
        if pooled(self.conf):
            return
        self.metadata_copies = copies
        metadata_copy.watch(self.control_driver.queue_controller, copies)

    def _own_pool(self, conf):
        """The registered pool whose URI Zaqar just gave this driver."""
        uri = conf[self.OPTIONS.GROUP_NAME].uri
        with control_store.reached():
            pools = next(self.control_driver.pools_controller.list(
                limit=0, detailed=True))
            return next((p for p in pools if p['uri'] == uri), None)

    @classmethod
    def driver_options(cls, options):
        """``_DRIVER_OPTIONS`` for a backend whose option module is
        ``options`` (Zaqar registers these before ``__init__`` runs)."""
        return [(options.GROUP_NAME, options.ALL_OPTS),
                (limits.GROUP_NAME, limits.ALL_OPTS)]

    @property
    def capabilities(self):
        return self.BASE_CAPABILITIES

    def catalogue(self, queue, project):
        """With pooling, file ``queue`` under this driver's pool in Zaqar's
        catalogue unless it is filed already.

        Called for the queues this driver copies messages into (dead-letter
        queues, group move targets): Zaqar catalogues only the queues
        created through its API, and looks nowhere else, so a target this
        driver created would be unreadable. A target filed under another
        pool is logged: the copies land in this pool, where Zaqar will not
        look (docs/scaling.md)."""
        if self.pool_name is None:
            return
        catalogue = self.control_driver.catalogue_controller
        try:
            with control_store.reached():
                pool = catalogue.get(project, queue)['pool']
        except storage_errors.QueueNotMapped:
            with control_store.reached():
                catalogue.insert(project, queue, self.pool_name)
            return
        if pool != self.pool_name:
            LOG.error('queue %r of project %r is on pool %r, but messages '
                      'for it (dead letters, a moved group) are stored in '
                      'pool %r, where Zaqar will not find them: put it on '
                      'the same pool (flavor) as the queues that feed it',
                      queue, project, pool, self.pool_name)

    def _health(self):
        return {'storage_reachable': self.is_alive(),
                'operation_status': self._get_operation_status()}

    def upgrade_layout(self, say):
        """Bring data written by an earlier version of this package to
        the layout this one reads (``zaqar-delay-migrate
        --upgrade-layout``), then record that version in the store;
        ``say(line)`` reports. A store of a later layout is refused
        (errors.LayoutMismatch) and left as it is."""
        raise NotImplementedError

    def recheck_layout(self):
        """Read the store's layout version again, as every gc pass does
        before it touches a queue: raise errors.LayoutMismatch unless it
        is still the one this driver reads (its first use checked it
        once)."""
        raise NotImplementedError

    def queues(self):
        """``(project, queue)`` of every queue this store keeps messages
        of (each backend's own index of queues: no work per message)."""
        raise NotImplementedError

    def exclusive_gc(self):
        """One gc pass for zaqar-delay-gc, which reports
        errors.GcPassRunning (a backend that lets one pass run at a time
        raises it when another host holds the pass); Zaqar's ``gc()`` hook
        never raises it. Default: ``gc()``."""
        return self.gc()

    def gc_each(self, queues):
        """Run ``settle()`` for each ``(name, settle)`` of ``queues``,
        isolated: a queue that fails is logged with its name and the reason
        and skipped, so no queue can stop gc for the others. An unreachable
        store stops the pass (the error is raised; zaqar-delay-gc backs off
        and tries again). ``settle`` returns how many expired messages it
        removed and calls :meth:`clean_queue` for its queue, which adds what
        retention removed to the pass itself. Returns the pass's
        :class:`GcPass`.

        A visit takes at most VISIT_STEPS bounded steps of a kind: a
        queue left with more (a backlog retention no longer keeps, a
        tenant posting as fast as gc removes) is visited again after every
        other queue, in rounds, while the pass is younger than
        ``full_scan_time``; what is left then waits for the next pass."""
        # A store upgraded under a running host (zaqar-delay-migrate
        # --upgrade-layout) would be misread: drafts and strays of a layout
        # this host does not know look removable to it.
        self.recheck_layout()
        result = GcPass()
        started = time.monotonic()
        # One pass at a time per driver: zaqar-delay-gc and Zaqar's gc()
        # hook call gc() from one thread.
        self._gc_pass = result
        try:
            unfinished = self._visit(result, queues, first=True)
            while unfinished and (time.monotonic() - started
                                  < self.retention_conf.full_scan_time):
                unfinished = self._visit(result, unfinished)
            if unfinished:
                LOG.info('gc: %d queues have more to remove; the next pass '
                         'goes on', len(unfinished))
        finally:
            self._gc_pass = None
            result.seconds = time.monotonic() - started
        if result.skipped:
            LOG.warning('gc skipped %d queues this pass', result.skipped)
        return result

    def _visit(self, result, queues, first=False):
        """One round of gc_each; returns the queues left unfinished."""
        unfinished = []
        for name, settle in queues:
            self.gc_heartbeat()
            result.visits += 1
            result.queues += first
            self._visit_unfinished = False
            try:
                result.expired += settle()
            except errors.GcPassRunning:
                raise
            except Exception as exc:
                if (isinstance(exc, storage_errors.ConnectionError)
                        and not self.is_alive()):
                    raise
                result.skipped += 1
                LOG.error('gc skipped %s: %s', name, exc)
                continue
            if self._visit_unfinished:
                unfinished.append((name, settle))
        return unfinished

    def gc_may_go_on(self, steps):
        """A queue's visit in a gc pass took ``steps`` bounded steps and
        has more: True if it may take another; else the queue is visited
        again after the others (gc_each). Outside a pass: always True."""
        if self._gc_pass is None or steps < VISIT_STEPS:
            return True
        self._visit_unfinished = True
        return False

    def gc_heartbeat(self):
        """Called by a gc pass before each queue and each retention batch:
        a store whose passes must not overlap (Swift: a lease) checks here
        that this pass still holds it, raising errors.GcPassRunning if
        not."""

    def clean_queue(self, queue, project):
        """Remove what retention no longer keeps from one queue, in
        batches of ``tuples_per_iteration`` with ``iteration_delay``
        between them; returns how many messages were removed (and, inside
        :meth:`gc_each`, adds them to the pass). Each batch is one bounded
        store step, safe on several hosts at once."""
        batch = self.retention_conf.tuples_per_iteration
        removed = steps = 0
        while True:
            count, more = self.message_controller.clean(queue, project,
                                                        batch)
            removed += count
            steps += 1
            if self._gc_pass is not None:
                # Per batch, so a queue that fails half way still reports
                # what it removed.
                self._gc_pass.retention += count
                self.gc_heartbeat()
            if not more or not self.gc_may_go_on(steps):
                return removed
            if self.retention_conf.iteration_delay:
                time.sleep(self.retention_conf.iteration_delay)

    @decorators.lazy_property(write=False)
    def message_controller(self):
        return self.MESSAGE_CONTROLLER(self)

    @decorators.lazy_property(write=False)
    def claim_controller(self):
        return self.CLAIM_CONTROLLER(self)

    @decorators.lazy_property(write=False)
    def subscription_controller(self):
        return self.SUBSCRIPTION_CONTROLLER(self)
