"""The MongoDB data driver (``message_store = delay.mongodb``).

Layout and indexes: fields.py; queries and the index each one uses:
queries.py and docs/mongodb.md. Time comes from the MongoDB server's clock
(clock.py): the ``hello`` command's ``localTime``, as an offset to the
local monotonic clock measured every ``clock_sync_interval`` seconds and
after a fault, or read once per operation and passed down. Atomicity
comes from single-document conditional updates and unique indexes;
every pymongo call goes through one fault translator (connection.py).
"""

import functools

from oslo_log import log as logging
from zaqar.common import decorators
from zaqar.storage import base as storage

from zaqar_delay import driver as base
from zaqar_delay.conf import mongodb as mongodb_conf
from zaqar_delay.drivers.mongodb import claims
from zaqar_delay.drivers.mongodb import clock
from zaqar_delay.drivers.mongodb import connection
from zaqar_delay.drivers.mongodb import fields
from zaqar_delay.drivers.mongodb import layout
from zaqar_delay.drivers.mongodb import messages
from zaqar_delay.drivers.mongodb import metadata
from zaqar_delay.drivers.mongodb import state
from zaqar_delay.drivers.mongodb import subscriptions

LOG = logging.getLogger(__name__)

# gc(): expired messages dropped per queue per pass.
GC_BATCH = 1000
# gc(): queue counters read a request (one pass holds a page of them).
COUNTER_PAGE = 1000


class DataDriver(base.DataDriver):

    BASE_CAPABILITIES = (storage.Capabilities.FIFO,
                         storage.Capabilities.CLAIMS,
                         storage.Capabilities.DURABILITY,
                         storage.Capabilities.AOD,
                         storage.Capabilities.HIGH_THROUGHPUT)

    OPTIONS = mongodb_conf
    _DRIVER_OPTIONS = base.DataDriver.driver_options(mongodb_conf)
    MESSAGE_CONTROLLER = messages.MessageController
    CLAIM_CONTROLLER = claims.ClaimController
    SUBSCRIPTION_CONTROLLER = subscriptions.SubscriptionController

    # Tests only: ``client_factory(uri, **options)`` replaces pymongo's
    # ``MongoClient`` (to run on mongomock); production leaves it unset.
    # The class attribute reaches drivers that Zaqar itself builds.
    client_factory = None

    def __init__(self, conf, cache, control_driver, client_factory=None):
        super().__init__(conf, cache, control_driver)
        self._client_factory = client_factory or self.client_factory
        self.keep_metadata_copies(metadata.MongoCopies(self))
        self.settle_schedule = state.SettleSchedule()

    @decorators.lazy_property(write=False)
    def connection(self):
        return connection.make_client(
            self.store_conf.uri, self.store_conf.server_selection_timeout,
            self.store_conf.socket_timeout, self._client_factory)

    @decorators.lazy_property(write=False)
    def database(self):
        connection.translate(connection.check_server, self.connection)
        database = self.connection[self.store_conf.database]
        connection.translate(ensure_indexes, database)
        if self.check_layout:
            connection.translate(layout.check, database)
        return database

    def recheck_layout(self):
        if self.check_layout:
            connection.translate(layout.check, self.database)

    def upgrade_layout(self, say):
        connection.translate(layout.upgrade, self.database, say)

    def _collection(self, name):
        return connection.GuardedCollection(self.database[name],
                                            self.clock.invalidate)

    @decorators.lazy_property(write=False)
    def messages(self):
        return self._collection(fields.MESSAGES)

    @decorators.lazy_property(write=False)
    def claims(self):
        return self._collection(fields.CLAIMS)

    @decorators.lazy_property(write=False)
    def counters(self):
        return self._collection(fields.COUNTERS)

    @decorators.lazy_property(write=False)
    def moves(self):
        return self._collection(fields.MOVES)

    @decorators.lazy_property(write=False)
    def given_up(self):
        return self._collection(fields.GIVEN_UP)

    @decorators.lazy_property(write=False)
    def pins(self):
        return self._collection(fields.PINS)

    @decorators.lazy_property(write=False)
    def sticky_clients(self):
        return self._collection(fields.STICKY_CLIENTS)

    @decorators.lazy_property(write=False)
    def queue_meta(self):
        return self._collection(fields.QUEUE_META)

    @decorators.lazy_property(write=False)
    def carried(self):
        return self._collection(fields.CARRIED)

    @decorators.lazy_property(write=False)
    def subscriptions(self):
        return self._collection(fields.SUBSCRIPTIONS)

    @decorators.lazy_property(write=False)
    def clock(self):
        return clock.StoreClock(self._server_time,
                                self.store_conf.clock_sync_interval)

    def _server_time(self):
        reply = connection.translate(self.connection.admin.command, 'hello')
        return reply['localTime']

    def now(self):
        """"Now" in epoch ms: the server's clock, or the test clock."""
        return self.clock()

    def use_clock(self, fn):
        """Tests only: take "now" (epoch ms) from ``fn()`` instead of the
        MongoDB clock; ``None`` restores the MongoDB clock."""
        self.clock.override = fn

    def is_alive(self):
        try:
            return bool(self.connection.admin.command('ping').get('ok'))
        except Exception:
            return False

    def close(self):
        self.connection.close()

    def _health(self):
        health = super()._health()
        health['message_volume'] = self.message_volume()
        return health

    def message_volume(self):
        """The health report's message counts, as Zaqar's MongoDB driver
        gives them, without its two full scans: ``total`` from the
        collection's metadata (O(1); it may lag an unclean shutdown), and
        ``claimed`` from the partial ``zd_claim`` index, which holds only
        claimed messages (work grows with the messages in flight, never
        with the backlog)."""
        total = self.messages.estimated_document_count()
        claimed = self.messages.count_documents(
            {fields.STATE: fields.CLAIMED}, hint='zd_claim')
        return {'free': max(0, total - claimed), 'claimed': claimed,
                'total': total}

    def gc(self):
        """Settle every queue that has messages: end lapsed claims, promote due
        messages, drop up to GC_BATCH expired messages each, finish stale group
        moves, repair group heads (groups.repair, resuming at the queue's
        cursor), free a batch of idle sticky clients' groups, give back stale
        position reservations and forget given-up positions no consumer counts
        any more (given_up.py), then remove what retention no longer keeps
        (clean_queue). Each queue is isolated (gc_each). Safe on several
        hosts at once: every step is a conditional update. Returns the
        pass's GcPass."""
        result = self.gc_each(
            ('queue {!r} of project {!r}'.format(counter['q'], counter['p']),
             functools.partial(self._gc_queue, counter))
            for counter in self._every_counter())
        LOG.debug('gc pass: %s', result)
        return result

    def _every_counter(self):
        """Every queue's counter (the fields gc needs), COUNTER_PAGE at a
        time in ``_id`` order: a pass holds one page, however many queues
        tenants made."""
        where = {}
        while True:
            page = self.counters.find(
                where, {'p': True, 'q': True, 'x': True,
                        fields.GROUP_CURSOR: True}, [('_id', 1)],
                COUNTER_PAGE)
            yield from page
            if len(page) < COUNTER_PAGE:
                return
            where = {'_id': {'$gt': page[-1]['_id']}}

    def queues(self):
        # A counter with ``x`` is a deleted queue's, kept for its
        # positions (MessageController._keep_positions_only).
        return [(counter['p'], counter['q']) for counter in
                self.counters.find({'x': None}, {'p': True, 'q': True})]

    def _gc_queue(self, counter):
        """One queue's gc; returns the expired messages it dropped (what
        retention removed, clean_queue adds to the pass itself)."""
        queue, project = counter['q'], counter['p']
        if counter.get('x') is not None and not self._in_use(queue, project):
            return 0        # a deleted queue's counter, kept a day
        dropped = self.message_controller.gc(
            queue, project, GC_BATCH, counter.get(fields.GROUP_CURSOR))
        self.clean_queue(queue, project)
        return dropped

    def _in_use(self, queue, project):
        """Whether a deleted queue's kept counter is its name's queue's
        again: it holds messages (one a writer from before the deletion
        stored, or a move landed, takes no new position). Then the
        counter is kept for good (its ``x`` cleared): the TTL monitor
        must not remove the counter, gc's registry entry, of a queue with
        messages, nor let its positions start again under them."""
        where = fields.queue_filter(queue, project)
        if not self.messages.find(where, {'_id': True}, None, 1,
                                  'zd_position'):
            return False
        self.counters.update_one(where, {'$set': {'x': None}})
        return True


def ensure_indexes(database):
    """Create every index of fields.INDEXES (a no-op when they exist)."""
    for collection, indexes in fields.INDEXES.items():
        for name, (keys, options) in indexes.items():
            database[collection].create_index(keys, name=name, **options)
