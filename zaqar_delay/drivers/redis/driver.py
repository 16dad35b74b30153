"""The Redis data driver (``message_store = delay.redis``)."""

import itertools
import time
from urllib import parse

from oslo_log import log as logging
from zaqar.common import decorators
from zaqar.storage import base as storage

from zaqar_delay import driver as base
from zaqar_delay import errors
from zaqar_delay import metadata_copy
from zaqar_delay.conf import redis as redis_conf
from zaqar_delay.drivers.redis import claims
from zaqar_delay.drivers.redis import connection
from zaqar_delay.drivers.redis import keys
from zaqar_delay.drivers.redis import layout
from zaqar_delay.drivers.redis import messages
from zaqar_delay.drivers.redis import metadata
from zaqar_delay.drivers.redis import scripts
from zaqar_delay.drivers.redis import subscriptions

LOG = logging.getLogger(__name__)

# gc(): messages settled or dropped per script call (gc repeats the call
# until a queue is settled, each call short), and how old an unfinished
# dead-letter copy or group move must be before gc finishes it.
GC_BATCH = 50
GC_OUTBOX_AGE_MS = 60 * 1000
# Added to the computed retry span: a retry's request may sit in the
# socket's send buffer, or in Redis' queue behind a slow script.
RETRY_MARGIN_MS = 10 * 1000
# Zaqar's shortest message ttl. Expired ids are not remembered, so a post
# retried after its messages expired would store them again: the retry
# span must stay below this.
SHORTEST_TTL_MS = 60 * 1000


class DataDriver(base.DataDriver):

    BASE_CAPABILITIES = (storage.Capabilities.FIFO,
                         storage.Capabilities.CLAIMS,
                         storage.Capabilities.AOD,
                         storage.Capabilities.HIGH_THROUGHPUT)

    OPTIONS = redis_conf
    _DRIVER_OPTIONS = base.DataDriver.driver_options(redis_conf)
    MESSAGE_CONTROLLER = messages.MessageController
    CLAIM_CONTROLLER = claims.ClaimController
    SUBSCRIPTION_CONTROLLER = subscriptions.SubscriptionController

    @decorators.lazy_property(write=False)
    def connection(self):
        # A cluster client reads the slot map when it is built: retried
        # (and a 503 when no seed answers) as any other Redis call.
        client = self.guarded(lambda: connection.client_from_uri(
            self.store_conf.uri, self.store_conf.socket_timeout))
        if self.check_layout:
            self.guarded(lambda: layout.check(client))
        return client

    def upgrade_layout(self, say):
        layout.upgrade(self, say)

    def recheck_layout(self):
        if self.check_layout:
            self.guarded(lambda: layout.check(self.connection))

    @decorators.lazy_property(write=False)
    def scripts(self):
        return scripts.QueueScripts(self.connection)

    @property
    def retry_span_ms(self):
        """How long after a call a retry of it may still arrive: every
        attempt timing out, plus the sleeps between them, plus the wait for
        a Redis that is loading its data set."""
        conf = self.store_conf
        attempts = conf.max_reconnect_attempts
        sleeps = conf.reconnect_sleep * (2 ** attempts - 1)
        return int(((attempts + 1) * conf.socket_timeout + sleeps
                    + conf.loading_wait) * 1000) + RETRY_MARGIN_MS

    @property
    def deleted_id_memory_ms(self):
        return self.store_conf.deleted_id_memory * 1000

    def use_clock(self, clock):
        """Tests only: take "now" (epoch ms) from ``clock()`` instead of
        the Redis clock; ``None`` restores the Redis clock."""
        self.scripts.clock = clock

    def guarded(self, call, kept_until=None):
        return connection.guarded(call,
                                  self.store_conf.max_reconnect_attempts,
                                  self.store_conf.reconnect_sleep,
                                  self.store_conf.loading_wait, kept_until)

    def result_kept_until(self):
        """For a call starting now that keeps its result for the retry
        span (claim.lua): the monotonic time after which a retry could
        reach Redis once that result is gone. Its last attempt starts no
        later than a call's last attempt within its reconnect attempts
        and loading wait could, so its request has the same margin."""
        return time.monotonic() + (
            self.retry_span_ms - RETRY_MARGIN_MS) / 1000 - \
            self.store_conf.socket_timeout

    def __init__(self, conf, cache, control_driver):
        super().__init__(conf, cache, control_driver)
        store = self.store_conf
        if store.replica_acks and \
                store.replica_ack_timeout >= store.socket_timeout:
            raise ValueError(
                '[{}] replica_ack_timeout = {} must be below socket_timeout '
                '= {}'.format(redis_conf.GROUP_NAME, store.replica_ack_timeout,
                              store.socket_timeout))
        if store.replica_acks and connection.uri_is_cluster(store.uri):
            # WAIT counts the replicas of the node it is sent to, and a
            # pipeline on a cluster is split over several masters.
            raise ValueError(
                '[{}] replica_acks = {} is not supported with Redis Cluster '
                '(uri has ?cluster=true); set it to 0'.format(
                    redis_conf.GROUP_NAME, store.replica_acks))
        self.keep_metadata_copies(metadata.RedisCopies(self))
        if self.retry_span_ms >= SHORTEST_TTL_MS:
            LOG.warning(
                'The retry span of [%s] (%.1f s: (max_reconnect_attempts + '
                '1) x socket_timeout + reconnect sleeps + loading_wait + '
                '%d s) reaches Zaqar\'s shortest message ttl (%d s): a post '
                'retried after its messages expired would store them '
                'again. Lower those options.', redis_conf.GROUP_NAME,
                self.retry_span_ms / 1000, RETRY_MARGIN_MS // 1000,
                SHORTEST_TTL_MS // 1000)

    @property
    def on_cluster(self):
        return connection.uri_is_cluster(self.store_conf.uri)

    def run_script(self, name, queue, project, *args, client=None,
                   keeps_result=False):
        return self.run_attempts(name, queue, project, lambda first: args,
                                 client=client, keeps_result=keeps_result)

    def run_attempts(self, name, queue, project, args_of, client=None,
                     keeps_result=False):
        """Run a script with the ARGV ``args_of(first)`` gives: ``first``
        is True on the first attempt only, False on every retry of the
        call (after a lost connection or reply), so a script can skip
        work that only a retried call needs. ``keeps_result``: the script
        keeps its result for the retry span (claim, pop), so a call whose
        outcome is in doubt is retried as long as that result lasts
        (connection.guarded)."""
        attempts = itertools.count()
        kept_until = self.result_kept_until() if keeps_result else None
        # Checked on the first attempt only: a retry after a lost reply
        # must do what that first run did, which the check let through.
        assumed = metadata_copy.take_assumed(
            queue, project, repeatable=name in scripts.REPEATABLE)

        def run(client):
            first = next(attempts) == 0
            return self.scripts.run(name, queue, project, *args_of(first),
                                    client=client,
                                    generation=assumed if first else None)
        if client is not None:
            return run(client)
        if self.store_conf.replica_acks:
            return self.pipelined(run, kept_until)[0]
        return self.guarded(lambda: run(None), kept_until)

    def pipelined(self, fill, kept_until=None):
        """Send the commands ``fill(pipe)`` queues in one round trip.

        Not a MULTI transaction: each queued command is a script or a
        single idempotent command, atomic on its own. On a cluster the
        client splits the batch by slot; callers only batch keys of one
        queue (one slot) and never scripts (a cluster pipeline does not
        load a script a node lacks). With ``replica_acks`` (never on a
        cluster), a WAIT on the same connection ends the batch."""
        acks = self.store_conf.replica_acks

        def send():
            with self.connection.pipeline(transaction=False) as pipe:
                fill(pipe)
                if acks:
                    pipe.execute_command(
                        'WAIT', acks,
                        int(self.store_conf.replica_ack_timeout * 1000))
                results = pipe.execute()
            if acks:
                confirmed = results.pop()
                if confirmed < acks:
                    LOG.warning('Redis WAIT: %d of %d replicas confirmed '
                                'the writes within %.2f s; acknowledged '
                                'anyway', confirmed, acks,
                                self.store_conf.replica_ack_timeout)
            return results
        return self.guarded(send, kept_until)

    def register_queue(self, queue, project):
        self.guarded(lambda: self.connection.sadd(
            keys.QUEUE_REGISTRY, keys.queue_tag(queue, project)))

    def unregister_queue(self, queue, project):
        self.guarded(lambda: self.connection.srem(
            keys.QUEUE_REGISTRY, keys.queue_tag(queue, project)))

    def has_messages(self, queue, project):
        """True if the queue holds messages or outbox entries."""
        queue_keys = dict(zip(keys.QUEUE_KEY_SUFFIXES,
                              keys.queue_keys(queue, project)))
        return bool(self.guarded(lambda: self.connection.exists(
            queue_keys['msgs'], queue_keys['outbox'])))

    def _health(self):
        health = super()._health()
        health['persistence'] = self.persistence()
        return health

    def persistence(self):
        """Whether Redis keeps what it acknowledged across a restart.

        Every guarantee of this driver (no acknowledged message lost, no
        deleted message back) holds across a Redis restart only with the
        append-only file on (``appendonly yes``, ``appendfsync everysec`` or
        ``always``); with RDB snapshots alone a restart rolls the queues
        back to the last snapshot. On a cluster, every master must have
        it."""
        try:
            info = self.guarded(lambda: self.connection.info(
                'persistence',
                **connection.on_every_master(self.connection)))
        except errors.BackendUnavailable as exc:
            return {'aof_enabled': None, 'error': str(exc)}
        # A cluster client answers {node name: info} (on_every_master).
        masters = [info] if 'aof_enabled' in info else list(info.values())
        report = {'aof_enabled': all(int(master.get('aof_enabled', 0))
                                     for master in masters)}
        if not report['aof_enabled']:
            report['warning'] = (
                'Redis append-only file (AOF) is off: a Redis restart loses '
                'messages posted, and brings back messages deleted or '
                'claimed, since the last RDB snapshot.')
        return report

    def is_alive(self):
        try:
            return bool(self.connection.ping(
                **connection.on_every_master(self.connection)))
        except Exception:
            return False

    def close(self):
        # Not through the property: a driver never used (or refused by
        # the layout check) has no connection to close.
        client = getattr(self, '_lazy_connection', None)
        if client is not None:
            client.close()

    def gc(self):
        """Settle every known queue: expired claims, due and expired
        messages, unfinished dead-letter moves; then remove what retention
        no longer keeps (clean_queue). Safe on several hosts at once: each
        step is an atomic script. Returns the pass's GcPass."""
        done = self.gc_each(self._gc_one(project, queue)
                            for project, queue in self.queues())
        LOG.debug('gc removed %d expired messages and %d by retention',
                  done.expired, done.retention)
        return done

    def queues(self):
        tags = self.guarded(lambda: list(
            self.connection.sscan_iter(keys.QUEUE_REGISTRY)))
        return [_untag(tag.decode()) for tag in tags]

    def _gc_one(self, project, queue):
        def settle():
            # The expired count; clean_queue adds its removals to the pass.
            dropped = self.message_controller.gc(queue, project, GC_BATCH,
                                                 GC_OUTBOX_AGE_MS)
            self.clean_queue(queue, project)
            return dropped

        return 'queue {!r} of project {!r}'.format(queue, project), settle


def _untag(tag):
    project, queue = tag.split('/', 1)
    return parse.unquote(project) or None, parse.unquote(queue)
