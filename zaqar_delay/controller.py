"""The one message contract that every zaqar-delay backend implements.

The public methods are Zaqar's ``storage.Message`` / ``storage.Claim`` API.
They validate input, read the queue's policy once, and hand backends plain,
validated values; each backend implements only the ``_``-prefixed primitives
that touch its store. The contract, stated once:

* Every message has ``id``, ``body``, ``ttl``, ``created``, ``expires``
  (created + ttl), ``d`` (created + effective delay: the time it becomes
  due), an optional group id, claim state (claim id, claim expiry, claim
  count) and a per-queue monotonic position, which is the list marker.
* A message is *due* when ``d <= now``. Claim, pop and first never return a
  message that is not due, expired, or claimed by a live claim; list leaves
  out messages that are not due unless ``include_delayed`` is given.
* Claims hand out due messages in position order. A claim keeps each message
  alive until the claim ends (``expires >= claim expiry + grace``).
* When a live claim ends (expiry or release) its messages are claimable
  again, after the queue's ``_redelivery_delay`` if it has one.
* A message about to be claimed for the ``_max_claim_count + 1``-th time is
  moved to ``_dead_letter_queue`` (its ttl becoming
  ``_dead_letter_queue_messages_ttl`` when set) or, with no dead-letter
  queue, dropped.
* ``now`` is taken once per operation, from the store's clock where the
  store has one.
"""

import abc
import dataclasses
import datetime
import functools
import re

from zaqar.storage import base as storage
from zaqar.storage import errors as storage_errors

from zaqar_delay import conf as zd_conf
from zaqar_delay import consumers
from zaqar_delay import control_store
from zaqar_delay import errors
from zaqar_delay import metadata_copy
from zaqar_delay import retention
from zaqar_delay import rules
from zaqar_delay import sticky
from zaqar_delay.conf import limits
from zaqar_delay.conf import retention as retention_options


def _policy_call(method):
    """A public call that reads its queue's policy: with a backend that
    checks generations in its requests, that read may come from the
    process's cached copy, and the call runs again if the copy was stale
    (metadata_copy.run_operation)."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        return metadata_copy.run_operation(
            self.driver.metadata_copies,
            lambda: method(self, *args, **kwargs))
    return run


class MessageController(storage.Message, metaclass=abc.ABCMeta):
    """Zaqar's message API on top of a backend's primitives."""

    # Whether the backend implements _message_group_sticky; one that does
    # not refuses the attribute (400) rather than ignore it.
    STICKY_GROUPS = False

    def __init__(self, driver):
        super().__init__(driver)
        zd_conf.register(driver.conf, limits, retention_options)
        self._limits = driver.conf[limits.GROUP_NAME]
        self._operator_retention = retention.OperatorRetention(driver.conf)
        self._retention_conf = driver.conf[retention_options.GROUP_NAME]
        # {(queue, project): (metadata, its policy)}: see policy().
        self._policies = {}

    # -- shared rules ------------------------------------------------------

    def queue_metadata(self, queue, project):
        """The queue's metadata; raises QueueDoesNotExist. From the data
        store's exact copy when the backend keeps one (metadata_copy.py),
        else from Zaqar's control store."""
        copies = self.driver.metadata_copies
        if copies is None:
            return self._control_metadata(queue, project)
        return metadata_copy.read(copies, queue, project, lambda:
                                  self._control_metadata(queue, project))

    def _control_metadata(self, queue, project):
        with control_store.reached():
            return self.driver.queue_controller.get_metadata(queue, project)

    def policy(self, queue, project):
        """The queue's validated policy; raises QueueDoesNotExist.

        The policy made from a metadata object is kept beside it: a
        backend whose process cache hands out the same object until the
        metadata changes (metadata_copy.ProcessCache) then checks it once,
        not on every call (8-12 us each). Keyed by identity, and the
        object is held, so a new one is always checked."""
        metadata = self.queue_metadata(queue, project)
        known = self._policies.get((queue, project))
        if known is not None and known[0] is metadata:
            return known[1]
        policy = self.check_metadata(queue, metadata, project)
        if len(self._policies) >= metadata_copy.PROCESS_CACHE_SIZE:
            self._policies.clear()
        self._policies[(queue, project)] = (metadata, policy)
        return policy

    def check_metadata(self, queue, metadata, project=None):
        """The policy ``metadata`` gives queue ``queue``; raises
        InvalidInput, naming the attribute, if it is not valid."""
        policy = rules.QueuePolicy.from_metadata(
            metadata, self._limits.max_message_delay, queue=queue)
        if policy.sticky and not self.STICKY_GROUPS:
            raise errors.InvalidInput(
                '{} is not implemented by the {} store yet'.format(
                    rules.STICKY,
                    type(self.driver).__module__.split('.')[-2]))
        return dataclasses.replace(policy, retention=retention.from_metadata(
            metadata, self._operator_retention.for_queue(queue, project)))

    def read_policy(self, queue, project, purge=False, pop=False):
        """The queue's validated policy for a claim or pop: its retention
        includes what the persistent consumers have all read, and on a
        sticky queue it names the client (InvalidInput when none is
        known), except for Zaqar's own ``purge``, which takes every group,
        pinned or not, and pins none. A ``pop`` is not refused for what
        the operator tightened since the metadata was stored
        (lenient_policy)."""
        policy = (self.lenient_policy(queue, project) if pop
                  else self.policy(queue, project))
        return dataclasses.replace(
            policy,
            client=None if purge else sticky.client_for(queue, policy),
            retention=self.with_readers(queue, project, policy.retention))

    def lenient_policy(self, queue, project):
        """The policy of a call that takes what is there (a pop; gc
        finishing a dead-letter move): delays, which it never applies,
        are not checked against today's ``max_message_delay``, and a
        ``_retention`` looser than the operator's settings now allow
        gives way to them, as for listings. Zaqar answers 503 to any
        error of a pop, its queue purge, which pops, would stop, and gc
        would skip the queue on every pass."""
        try:
            return self.policy(queue, project)
        except errors.InvalidInput:
            metadata = self.queue_metadata(queue, project)
            policy = rules.QueuePolicy.from_metadata(
                metadata, rules.ANY_DELAY, queue=queue)
            return dataclasses.replace(
                policy, retention=retention.for_reads(
                    metadata, self._operator_retention.for_queue(queue,
                                                                 project)))

    def retention_of(self, queue, project):
        """What ``queue`` keeps, for reads and cleanup: never an error
        for metadata stored before it was checked (retention.for_reads);
        a queue that does not exist gets the operator's settings. Includes
        what its persistent consumers have all read."""
        try:
            metadata = self.queue_metadata(queue, project)
        except storage_errors.QueueDoesNotExist:
            return self._operator_retention.for_queue(queue, project)
        return self.retention_for(queue, project, metadata)

    def retention_for(self, queue, project, metadata):
        """``retention_of`` a queue whose metadata the caller has read."""
        operator = self._operator_retention.for_queue(queue, project)
        return self.with_readers(queue, project,
                                 retention.for_reads(metadata, operator))

    def with_readers(self, queue, project, kept):
        """``kept`` with the read-by-all cut of the queue's persistent
        consumers, when ``consumers_required`` asks for one (only then are
        the consumers read, so other queues pay nothing)."""
        if kept.consumers_required is None or kept.policy != retention.CLEANUP:
            return kept
        live, lowest, _ = self._live_readers(
            queue, project, idle=False,
            need=max(1, kept.consumers_required))
        return dataclasses.replace(
            kept, read_through=consumers.read_through_of(
                kept.consumers_required, live, lowest))

    @property
    def _idle_s(self):
        return self._retention_conf.consumer_idle_time

    def consumer_report(self, queue, project, consume_id):
        """The state of persistent consumer ``consume_id`` as subscription
        options show it (cursor, lag, lost, idle), or None. For a
        subscription get only: Zaqar's notifier lists the subscriptions on
        every post, and the lag is a count."""
        now_ms, consumer = self._consumer(queue, project, consume_id)
        if consumer is None:
            return None
        lag = self._count_after(queue, project, consumer.cursor,
                                self.retention_of(queue, project))
        return consumer.report(now_ms, self._idle_s, lag)


    def target_policy(self, target, project):
        """The policy of a queue that dead letters or a moved group are
        copied into. A missing one is created; one whose metadata is not
        valid takes them ungrouped (rules.QueuePolicy.for_arrivals): a
        message must never be stranded or lost because of its target."""
        self.driver.catalogue(target, project)
        try:
            metadata = self.queue_metadata(target, project)
        except storage_errors.QueueDoesNotExist:
            with control_store.reached():
                self.driver.queue_controller.create(target, project=project)
            metadata = {}
        return rules.QueuePolicy.for_arrivals(metadata)

    def carry_in(self, queue, project, messages, client_uuid):
        """Store ``messages`` moved in from another store (zaqar-delay-
        migrate), skipping an id this store holds and, where the store
        remembers them, one its consumer deleted: run again, a move must
        not bring back what was consumed here."""
        self._insert(queue, project, messages, client_uuid)

    @abc.abstractmethod
    def carried_in(self, queue, project, message_ids):
        """Those of ``message_ids`` a move carried in earlier, whether or
        not they are still here: verifying a move run again after
        consumers used this store, a message missing here was consumed,
        not lost."""

    # -- Zaqar's API -------------------------------------------------------

    @_policy_call
    def post(self, queue, messages, client_uuid, project=None):
        policy = self.policy(queue, project)
        prepared = rules.prepare_messages(
            messages, policy, self._limits.max_message_delay,
            self._limits.max_message_ttl,
            checksum=self.driver.conf.enable_checksum)
        return self._insert_new(queue, project, prepared, str(client_uuid))

    def list(self, queue, project=None, marker=None,
             limit=storage.DEFAULT_MESSAGES_PER_PAGE, echo=False,
             client_uuid=None, include_claimed=False, include_delayed=False):
        messages, next_marker = self._page(
            queue, project, marker, limit, echo, client_uuid,
            include_claimed, include_delayed)
        yield iter(messages)
        yield next_marker

    @_policy_call
    def _page(self, queue, project, marker, limit, echo, client_uuid,
              include_claimed, include_delayed):
        """list's (messages, marker of the next page)."""
        rules.check_limit(limit, self._limits.max_messages_per_page)
        client = None if client_uuid is None else str(client_uuid)
        position = _parse_marker(marker)
        listing = reader = None
        if client is None:
            if position is _UNKNOWN_MARKER:
                return [], marker
            listing = self._list(
                queue, project, position, limit, bool(echo), client,
                bool(include_claimed), bool(include_delayed),
                self.retention_of(queue, project))
        elif position is _UNKNOWN_MARKER:
            _, reader = self._consumer(queue, project, client)
            if reader is None:
                return [], marker
        else:
            reader, listing = self._list_unless_consumer(
                queue, project, position, limit, bool(echo), client,
                bool(include_claimed), bool(include_delayed),
                self.retention_of(queue, project))
        if reader is not None:
            # A persistent consumer's marker is its cursor: one that names
            # no position is refused (400), never an empty page forever.
            listing = self._consumer_page(
                queue, project, reader, reader.position_of(marker), limit)
        messages, next_marker = listing
        return messages, (str(next_marker) if next_marker is not None
                          else marker)

    def _consumer_page(self, queue, project, reader, marker, limit):
        """A persistent consumer's page (see consumers.py): acknowledge up
        to ``marker``, then hand out what follows the cursor, stopping
        before the first message that is not due, and before any position
        a post may still fill (read first: a later post's messages stored
        meanwhile lie beyond it). Its own posts are in it too (``echo``):
        a feed reader must not count them as lost."""
        if marker is not None:
            reader.check_ack(marker)
        start = marker if marker is not None else reader.cursor
        horizon = self._reserved_from(queue, project)
        kept = self.retention_of(queue, project)
        client = reader.consume_id
        # One listing with the messages that are not due, which end the
        # page: a listing of due ones alone would walk the whole delayed
        # run behind a delayed head on every poll.
        every, _ = self._list(queue, project, start, limit, True, client,
                              True, True, kept)
        page = []
        for message in every:
            if message.delayed or (
                    horizon is not None and message.position >= horizon):
                break
            page.append(message)
        page = self._settled_prefix(queue, project, start, page, kept)
        handed = page[-1].position if page else None
        lost = self._lost(queue, project, reader, start, page)
        self._consumer_update(queue, project, client, marker, handed, lost)
        return page, handed

    def _lost(self, queue, project, reader, start, page):
        """How many positions ``reader`` lost to a ``page`` listed after
        ``start``: those it skips (Consumer.skipped) but the ones their
        writer gave up, which never held a message."""
        if not page:
            return 0
        skipped = reader.skipped(start, page[0].position)
        gap = reader.gap(start, page[0].position)
        if not skipped or gap is None:
            return skipped
        return skipped - self._given_up(queue, project, *gap)

    @_policy_call
    def first(self, queue, project=None, sort=1):
        if sort not in (1, -1):
            raise ValueError('sort must be either 1 (ascending) '
                             'or -1 (descending)')
        message = self._first(queue, project, sort,
                              self.retention_of(queue, project))
        if message is None:
            raise storage_errors.QueueIsEmpty(queue, project)
        return message

    @_policy_call
    def get(self, queue, message_id, project=None):
        found = self._get_by_ids(queue, project, [message_id])
        if not found:
            raise storage_errors.MessageDoesNotExist(message_id, queue,
                                                     project)
        return found[0]

    @_policy_call
    def bulk_get(self, queue, message_ids, project=None):
        return iter(self._get_by_ids(queue, project, list(message_ids)))

    def _get_by_ids(self, queue, project, message_ids):
        """The live messages of ``message_ids`` that ``queue`` keeps. A
        backend that can read them and the queue's metadata in one
        request overrides this."""
        return self._get_many(queue, project, message_ids,
                              self.retention_of(queue, project))

    def delete(self, queue, message_id, project=None, claim=None):
        if claim is not None and not rules.is_claim_id(claim):
            raise storage_errors.ClaimDoesNotExist(claim, queue, project)
        self._delete(queue, project, message_id, claim)

    def bulk_delete(self, queue, message_ids, project=None, claim_ids=None):
        self._bulk_delete(queue, project, list(message_ids),
                          list(claim_ids) if claim_ids else None)

    @_policy_call
    def pop(self, queue, limit, project=None):
        rules.check_limit(limit, rules.pop_bound(
            self._limits.max_messages_per_claim_or_pop))
        # Zaqar's transport refuses a client's pop above this bound: only
        # Zaqar's own queue purge asks for more (rules.pop_bound); with the
        # bound raised to its 100, only its caller tells it from a client's.
        purge = (limit > self._limits.max_messages_per_claim_or_pop
                 or (limit == rules.ZAQAR_PURGE_POP
                     and rules.called_by_zaqars_purge()))
        try:
            policy = self.read_policy(queue, project, purge=purge,
                                      pop=True)
        except storage_errors.QueueDoesNotExist:
            # As Zaqar's drivers: nothing to pop from a queue that is not.
            return []
        return self._pop(queue, project, limit, policy)

    @_policy_call
    def stats(self, queue, project=None):
        """Zaqar's queue stats, with what retention keeps and removed."""
        kept = self.retention_of(queue, project)
        counts = self._stats(queue, project, kept)
        removed = counts.pop('removed_by_retention')
        report = kept.report(removed)
        # The key only appears on queues that have consumers.
        live, _, idle = self._live_readers(queue, project)
        if live or idle:
            report['consumers'] = {'live': live, 'idle': idle}
        return {'messages': counts, 'retention': report}

    @_policy_call
    def clean(self, queue, project, batch):
        """Remove up to ``batch`` messages that retention no longer keeps
        from ``queue``; returns (removed, more): ``more`` is True when the
        batch was full and another call may find more."""
        rules.check_limit(batch, field='batch')
        return self._clean(queue, project, self.retention_of(queue, project),
                           batch)

    # -- persistent consumers (consumers.py) ---------------------------------

    def register_consumer(self, queue, project, subscriber):
        """Called by the subscription controllers when a subscription is
        created: a ``cursor:`` subscriber becomes a persistent consumer
        (idempotent). Raises InvalidInput for a malformed one."""
        consume_id = consumers.consume_id_of(subscriber)
        if consume_id is not None:
            self._consumer_register(queue, project, consume_id)
        return consume_id

    def forget_consumer(self, queue, project, subscriber):
        """Called when a subscription is deleted (or expires). An update
        that changes a subscription's subscriber is register_consumer of
        the new one before storing it, then forget_consumer of the old."""
        consume_id = consumers.consume_id_of(subscriber)
        if consume_id is not None:
            self._consumer_forget(queue, project, consume_id)

    def list_consumers(self, queue, project):
        """(now_ms, [consumers.Consumer]) of the queue, for the operator
        command and stats."""
        return self._consumers(queue, project)

    # -- message groups (SPEC §4) -------------------------------------------

    def list_groups(self, queue, project=None, marker=None,
                    limit=storage.DEFAULT_MESSAGES_PER_PAGE):
        """One page of the queue's groups, in group-id order.

        Yields an iterator of ``{'id', 'depth', 'head', 'in_flight',
        'client'}`` (the group id as it appears in bodies, its number of
        live messages, the id of its first one, whether that one is
        claimed, and the live client it is pinned to on a sticky queue, or
        None), then the marker of the next page.
        """
        rules.check_limit(limit)
        groups = self._groups(queue, project,
                              None if marker is None
                              else rules.encode_group_id(marker), limit)
        yield iter(groups)
        yield groups[-1]['id'] if groups else marker

    def purge_group(self, queue, group, project=None):
        """Delete every message of ``group``, claimed or not; returns how
        many were deleted."""
        self.policy(queue, project)
        return self._purge_group(queue, project,
                                 rules.encode_group_id(group))

    def unpin_group(self, queue, group, project=None):
        """Free a sticky group from its client (operator): its next message
        goes to whichever client claims first. Returns the client it was
        pinned to, or None."""
        self.policy(queue, project)
        return self._unpin_group(queue, project,
                                 rules.encode_group_id(group))

    def _unpin_group(self, queue, project, group):
        """Unpin an encoded group; its former client or None. Backends
        without sticky groups have none to unpin."""
        return None

    def move_group(self, queue, group, target, project=None):
        """Move ``group`` to the tail of queue ``target`` (same project),
        keeping its order, each message's id, remaining ttl and remaining
        delay; returns how many moved. Refused (GroupInFlight) while the
        group's head is claimed."""
        if target == queue:
            raise errors.InvalidInput(
                'a group cannot be moved to the queue it is in')
        self.policy(queue, project)
        self.policy(target, project)
        return self._move_group(queue, project,
                                rules.encode_group_id(group), target)

    # -- primitives --------------------------------------------------------

    @abc.abstractmethod
    def _consumer(self, queue, project, consume_id):
        """(store now in ms, consumers.Consumer or None)."""

    @abc.abstractmethod
    def _consumers(self, queue, project):
        """(store now in ms, every consumers.Consumer of the queue), for
        the operator's listing; with_readers and stats use _live_readers."""

    def _live_readers(self, queue, project, idle=True, need=None):
        """(live consumers, their lowest cursor as
        consumers.lowest_cursor, idle consumers) of the queue; a backend
        may leave the idle ones uncounted (None) for a caller that asks
        no ``idle``, and stop counting live ones at ``need`` (the caller
        only compares the count with it). Default: from _consumers; a
        backend whose queues may have many consumers keeps these in
        indexes instead."""
        now_ms, found = self._consumers(queue, project)
        live = [c for c in found if not c.is_idle(now_ms, self._idle_s)]
        return (len(live), consumers.lowest_cursor(live),
                len(found) - len(live))

    @abc.abstractmethod
    def _consumer_register(self, queue, project, consume_id):
        """Create consumer ``consume_id`` with no cursor, active now; a
        consumer that exists is left as it is."""

    @abc.abstractmethod
    def _consumer_forget(self, queue, project, consume_id):
        """Remove the consumer's state; unknown ones are ignored."""

    @abc.abstractmethod
    def _consumer_update(self, queue, project, consume_id, ack, handed,
                         lost):
        """In one atomic step: cursor = max(cursor, ``ack``) when ``ack``
        is not None; handed = max(handed, ``handed``) when not None; lost
        += ``lost``; last active = store now. A consumer forgotten
        meanwhile stays forgotten."""

    def _reserved_from(self, queue, project):
        """The lowest position a post still storing may fill, or None when
        every post stores its messages as it takes their positions (one
        atomic step). A persistent page stops before it."""
        return None

    def _given_up(self, queue, project, after, before):
        """How many positions strictly between ``after`` and ``before`` a
        writer reserved and stored no message at. Default 0: the backend
        takes positions only for what it stores."""
        return 0

    def _settled_prefix(self, queue, project, start, page, retention):
        """The part of a persistent ``page`` (listed after ``start``) that
        no post still being written can fall inside: where a post takes
        its position before it stores and files its message (Swift), a
        page read meanwhile may hold later messages, and a cursor moved
        past the unfinished one would never come back to it. Default: the
        whole page (a post is one atomic step, or _reserved_from covers
        it)."""
        return page

    @abc.abstractmethod
    def _count_after(self, queue, project, position, retention):
        """How many messages ``retention`` keeps after ``position`` (None:
        all of them): a consumer's lag."""

    @abc.abstractmethod
    def _groups(self, queue, project, marker, limit):
        """Up to ``limit`` groups after the encoded group id ``marker``, as
        ``{'id' (decoded), 'depth', 'head', 'in_flight'}`` in the order of
        their encoded ids."""

    @abc.abstractmethod
    def _purge_group(self, queue, project, group):
        """Delete an encoded group's messages; return how many."""

    @abc.abstractmethod
    def _move_group(self, queue, project, group, target):
        """Move an encoded group to ``target`` in order, or raise
        GroupInFlight and move nothing; return how many moved."""

    @abc.abstractmethod
    def _insert(self, queue, project, messages, client_uuid):
        """Store ``messages`` (a list of :class:`rules.NewMessage`) at the
        tail of the queue in one atomic step, stamping created, expires and
        ``d`` with the store's clock."""

    def _insert_new(self, queue, project, messages, client_uuid):
        """_insert for a post, whose message ids this call just made up
        (no earlier call can have stored or deleted them): a backend may
        skip checks that only a retry of the call needs, or give a message
        another new id before any reader can know it. Returns the ids
        stored, in order."""
        self._insert(queue, project, messages, client_uuid)
        return [message.id for message in messages]

    @abc.abstractmethod
    def _list(self, queue, project, marker, limit, echo, client_uuid,
              include_claimed, include_delayed, retention):
        """Return (messages, next_marker): a full page of up to ``limit``
        messages after position ``marker`` (None: from the start), leaving
        out what ``retention`` no longer keeps."""

    def _list_unless_consumer(self, queue, project, marker, limit, echo,
                              client_uuid, include_claimed, include_delayed,
                              retention):
        """(the consumers.Consumer, None) when ``client_uuid`` is a
        persistent consumer of the queue (its listing is a consumer page),
        else (None, what _list returns). A backend may answer both in one
        request."""
        _, reader = self._consumer(queue, project, client_uuid)
        if reader is not None:
            return reader, None
        return None, self._list(queue, project, marker, limit, echo,
                                client_uuid, include_claimed,
                                include_delayed, retention)

    @abc.abstractmethod
    def _first(self, queue, project, sort, retention):
        """The oldest (1) or newest (-1) due message that ``retention``
        keeps, claimed or not, with its ``created`` time; None if there is
        none."""

    @abc.abstractmethod
    def _get_many(self, queue, project, message_ids, retention):
        """The live messages among ``message_ids`` that ``retention``
        keeps, in the given order."""

    @abc.abstractmethod
    def _delete(self, queue, project, message_id, claim_id):
        """Delete one message. A missing message is not an error. Raises
        MessageIsClaimed (claimed, no claim given), MessageNotClaimed
        (claim given, message not claimed) or MessageNotClaimedBy."""

    @abc.abstractmethod
    def _bulk_delete(self, queue, project, message_ids, claim_ids):
        """Delete messages; with ``claim_ids``, a claimed message is deleted
        only under one of them (else ClaimDoesNotMatch, nothing deleted)."""

    @abc.abstractmethod
    def _pop(self, queue, project, limit, policy):
        """Claim-and-delete up to ``limit`` due messages atomically."""

    @abc.abstractmethod
    def _purge_queue(self, queue, project):
        """Remove every message and claim of the queue."""

    @abc.abstractmethod
    def _stats(self, queue, project, retention):
        """Counts of the messages ``retention`` keeps: total, claimed,
        free, delayed, groups, groups_in_flight; oldest and newest when
        there are any; and ``removed_by_retention``, how many messages
        retention has removed from the queue so far."""

    @abc.abstractmethod
    def _clean(self, queue, project, retention, batch):
        """Remove up to ``batch`` messages that ``retention`` no longer
        keeps (never one under a live claim), counting each removal once
        even when several hosts clean at once; return (removed, more)."""


class ClaimController(storage.Claim, metaclass=abc.ABCMeta):
    """Zaqar's claim API on top of a backend's primitives."""

    def __init__(self, driver):
        super().__init__(driver)
        zd_conf.register(driver.conf, limits)
        self._limits = driver.conf[limits.GROUP_NAME]

    def _check_claim(self, metadata):
        """(ttl, grace) of claim metadata, within Zaqar's limits."""
        return rules.check_claim_metadata(metadata,
                                          self._limits.max_claim_ttl,
                                          self._limits.max_claim_grace)

    @_policy_call
    def create(self, queue, metadata, project=None,
               limit=storage.DEFAULT_MESSAGES_PER_CLAIM):
        ttl, grace = self._check_claim(metadata)
        rules.check_limit(limit, self._limits.max_messages_per_claim_or_pop)
        try:
            policy = self.driver.message_controller.read_policy(queue,
                                                                project)
        except storage_errors.QueueDoesNotExist:
            # As Zaqar's drivers: an empty claim (204), not an error.
            return None, iter([])
        claim_id, messages = self._claim(queue, project, ttl, grace, limit,
                                         policy)
        if not messages:
            return None, iter([])
        return claim_id, messages

    def get(self, queue, claim_id, project=None):
        found = (self._get_claim(queue, project, claim_id)
                 if rules.is_claim_id(claim_id) else None)
        if found is None:
            raise storage_errors.ClaimDoesNotExist(claim_id, queue, project)
        return found

    def update(self, queue, claim_id, metadata, project=None):
        if not rules.is_claim_id(claim_id):
            raise storage_errors.ClaimDoesNotExist(claim_id, queue, project)
        ttl, grace = self._check_claim(metadata)
        if not self._renew(queue, project, claim_id, ttl, grace):
            raise storage_errors.ClaimDoesNotExist(claim_id, queue, project)

    def delete(self, queue, claim_id, project=None):
        if rules.is_claim_id(claim_id):
            self._release(queue, project, claim_id)

    @abc.abstractmethod
    def _claim(self, queue, project, ttl, grace, limit, policy):
        """Atomically claim up to ``limit`` due, unclaimed messages in
        position order, dead-lettering those whose attempts ran out.
        Returns (claim_id, messages)."""

    @abc.abstractmethod
    def _get_claim(self, queue, project, claim_id):
        """(claim metadata, messages) of a live claim, or None."""

    @abc.abstractmethod
    def _renew(self, queue, project, claim_id, ttl, grace):
        """Reset a live claim's expiry to now + ttl; False if not live."""

    @abc.abstractmethod
    def _release(self, queue, project, claim_id):
        """End a claim now; its messages become claimable again (after the
        redelivery delay). Unknown claims are ignored."""


# A marker that no listing of ours returned: Zaqar's drivers list nothing
# after it (an empty page), so ours do too, without asking the store.
_UNKNOWN_MARKER = object()
_POSITION_TEXT = re.compile('[0-9]+')
# No position of any store is above it (MongoDB's are int64, and pymongo
# cannot even encode a larger int into a filter).
MAX_POSITION = 2 ** 63 - 1


def _parse_marker(marker):
    """Markers are positions; anything else is never interpreted."""
    if marker is None or marker == '':
        return None
    # Decimal ASCII digits only, as listings write them: int() also takes
    # '1_0', ' 10' and other scripts' digits ('٣'), which no listing
    # returned.
    if rules.is_strict_int(marker):
        position = marker
    elif isinstance(marker, str) and _POSITION_TEXT.fullmatch(marker):
        position = int(marker)
    else:
        return _UNKNOWN_MARKER
    return position if 0 <= position <= MAX_POSITION else _UNKNOWN_MARKER


class StoredMessage(dict):
    """Zaqar's message dict, plus the message's position in its queue
    (the list marker) and whether it is not due yet (a persistent
    consumer's page stops there), which Zaqar's contract does not show
    as keys."""

    __slots__ = ('position', 'delayed')


def basic_message(message_id, body, ttl_s, created_ms, now_ms, position,
                  claim_id=None, claim_count=0, include_created=False,
                  checksum=None, delayed=False):
    """The message dict Zaqar's transport renders: the keys of Zaqar's own
    drivers, ``checksum`` only for messages stored with one. ``delayed``:
    a listing without delayed messages would leave it out."""
    message = StoredMessage(
        id=message_id,
        ttl=ttl_s,
        age=max(0, (now_ms - created_ms) // 1000),
        body=body,
        claim_id=claim_id,
        claim_count=claim_count,
    )
    message.position = int(position)
    message.delayed = delayed
    if checksum:
        message['checksum'] = checksum
    if include_created:
        message['created'] = _iso(created_ms)
    return message


def _iso(epoch_ms):
    return datetime.datetime.fromtimestamp(
        epoch_ms // 1000, tz=datetime.timezone.utc).strftime(
            '%Y-%m-%dT%H:%M:%SZ')
