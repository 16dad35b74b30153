"""An exact copy of each queue's metadata in the data store (issue 21).

Every post, claim, pop and listing needs the queue's policy, which lives
in Zaqar's control store (two round trips with Zaqar's Redis control
driver). A backend that keeps a copy in its own data store gives its
driver a ``metadata_copies`` object (:class:`Copies`); the copy is read
in one request, with a generation, and stays exact because:

* every write of the control store's queue controller in this process
  (``create``, ``set_metadata``, ``delete``) forgets the copy (bump the
  generation, drop the copy) before and after the write (:func:`watch`);
* a copy is filled only on a miss, and only if the generation has not
  moved since the miss, so a fill that read the control store before a
  change never lands after that change forgot the copy;
* a copy is kept for COPY_TTL_MS at most, which bounds how long it may be
  stale when the forgetting after a write failed (the data store lost
  between the two) or the control store was written by a process without
  this driver.

Not used with pooling: Zaqar then writes queue metadata through its
management store from API nodes that may not have loaded a pool's driver
yet (it loads it at the first message call), so a write could go
unnoticed. See docs/redis.md, *Round trips per call*, and docs/mongodb.md,
*Requests per call*.
"""

import abc
import collections
import contextvars
import functools
import hashlib
import inspect
import threading
import time
import weakref

COPY_TTL_MS = 60 * 1000
# How long a generation outlives the last change of its queue: longer
# than any fill can take between its miss and its write.
GENERATION_TTL_MS = 24 * 3600 * 1000
# The control store's queue controller methods that change a queue.
WRITES = ('create', 'set_metadata', 'delete')
# Queues whose copy one process keeps at most (ProcessCache).
PROCESS_CACHE_SIZE = 10000
# Runs of an operation with the process's copies before one without.
CACHED_RUNS = 2


class Copies(metaclass=abc.ABCMeta):
    """One data store's copies of queue metadata."""

    @abc.abstractmethod
    def find(self, queue, project):
        """(the copy, or None when there is none, the generation read with
        it, or None when there is none): one request."""

    @abc.abstractmethod
    def fill(self, queue, project, generation, metadata):
        """Store ``metadata`` as the copy, only if the generation is still
        ``generation`` and no copy is there."""

    @abc.abstractmethod
    def forget(self, queue, project):
        """Bump the generation and drop the copy."""

    # A backend whose store can check a generation in the same request
    # that acts (Redis' scripts) sets a ProcessCache here, and implements
    # ``current``; see ``operation``.
    process_cache = None

    def current(self, queue, project, generation):
        """Whether the queue's generation is still ``generation``: one
        request, for an operation that ends without acting."""
        raise NotImplementedError


class StaleCopy(Exception):
    """The data store's generation moved since this process cached the
    copy: the request that found it did nothing."""


def digest(text):
    """What the process cache keeps of a copy's text, to tell a read of
    the same copy (a copy may be 64 KiB)."""
    if isinstance(text, str):
        text = text.encode()
    return hashlib.blake2b(text, digest_size=16).digest()


class ProcessCache:
    """The copies this process read, each with its generation, the
    monotonic time it must be read again by (when the copy or its
    generation expires in the store) and a digest of the text it was
    decoded from: least recently used dropped first."""

    def __init__(self, size=PROCESS_CACHE_SIZE):
        self._size = size
        self._entries = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, queue, project):
        """(metadata, generation) or None."""
        key = (queue, project)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[2] <= time.monotonic():
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return entry[0], entry[1]

    def unchanged(self, queue, project, generation, text_digest):
        """The metadata held for the queue if it was decoded, under
        ``generation``, from the text whose digest() is ``text_digest``;
        else None. A read of the store that finds the copy as it was
        keeps handing out the same object, so that the policy checked from
        it is reused (controller.policy): Zaqar reads the metadata from
        the store before every post."""
        with self._lock:
            entry = self._entries.get((queue, project))
        if (entry is None or entry[3] is None or entry[1] != generation
                or entry[3] != text_digest):
            return None
        return entry[0]

    def put(self, queue, project, metadata, generation, ttl_ms,
            text_digest=None):
        """``text_digest``: digest() of the text ``metadata`` was decoded
        from, if any."""
        with self._lock:
            self._entries[(queue, project)] = (
                metadata, generation, time.monotonic() + ttl_ms / 1000,
                text_digest)
            self._entries.move_to_end((queue, project))
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def drop(self, queue, project):
        with self._lock:
            self._entries.pop((queue, project), None)


class _Operation:
    """One public call's use of the process cache. At most one metadata
    read is served from the cache (``assumed``), and only before the call
    acted: the next script the call runs then carries the generation
    (take_assumed), and finding it moved, does nothing, so the call can
    run again."""

    def __init__(self, copies):
        self.copies = copies
        self.assumed = None      # (queue, project, generation)
        self.used = None         # (queue, project) served from the cache
        self.acted = False


_operation = contextvars.ContextVar('zaqar_delay_metadata_operation',
                                    default=None)


def run_operation(copies, call):
    """``call()``, a public message or claim call, served by the process's
    cached copies where that is exact (see _Operation): run again when a
    generation it assumed has moved, and at last without the cache (each
    read then reads the store, as without a process cache)."""
    if copies is None or copies.process_cache is None or \
            _operation.get() is not None:
        return call()
    for _ in range(CACHED_RUNS):
        operation = _Operation(copies)
        token = _operation.set(operation)
        try:
            result = call()
        except StaleCopy:
            _forget_used(operation)
            continue
        except Exception:
            if _confirmed(operation):
                raise
            continue
        finally:
            _operation.reset(token)
        if _confirmed(operation):
            return result
    token = _operation.set(_Operation(None))
    try:
        return call()
    finally:
        _operation.reset(token)


def _confirmed(operation):
    """Whether what ``operation`` assumed and never checked in a script
    (it ended before acting) is still current; if not, forget it."""
    if operation.assumed is None:
        return True
    queue, project, generation = operation.assumed
    if operation.copies.current(queue, project, generation):
        return True
    _forget_used(operation)
    return False


def _forget_used(operation):
    if operation.used is not None:
        operation.copies.process_cache.drop(*operation.used)


def take_assumed(queue, project, repeatable=False):
    """Called before a request on ``queue`` that may act (a script): the
    generation that request must check, when the call assumed ``queue``'s
    and has not checked it yet (None: check nothing). An assumption about
    another queue is checked first, in a request of its own (StaleCopy).
    ``repeatable``: the request changes nothing a caller sees when the
    whole call runs again (a read, and the housekeeping reads do), so the
    call may still read a cached policy after it."""
    operation = _operation.get()
    if operation is None:
        return None
    if not repeatable:
        operation.acted = True
    if operation.assumed is None:
        return None
    assumed_queue, assumed_project, generation = operation.assumed
    operation.assumed = None
    if (assumed_queue, assumed_project) == (queue, project):
        return generation
    if not operation.copies.current(assumed_queue, assumed_project,
                                    generation):
        _forget_used(operation)
        raise StaleCopy()
    return None


def _cached(copies, queue, project):
    operation = _operation.get()
    if operation is None or operation.copies is not copies or \
            operation.acted or operation.used is not None:
        return None
    found = copies.process_cache.get(queue, project)
    if found is None:
        return None
    metadata, generation = found
    operation.assumed = (queue, project, generation)
    operation.used = (queue, project)
    return metadata


def read(copies, queue, project, from_control_store):
    """The queue's metadata: the copy, or ``from_control_store()`` (which
    raises QueueDoesNotExist for a queue that is not), copied. Within a
    ``run_operation`` of a backend with a process cache, the first read
    may come from that cache (no request)."""
    if copies.process_cache is not None:
        cached = _cached(copies, queue, project)
        if cached is not None:
            return cached
    copy, generation = copies.find(queue, project)
    if copy is not None:
        return copy
    metadata = from_control_store()
    copies.fill(queue, project, generation, metadata)
    return metadata


def watch(queue_controller, copies):
    """Make every write of ``queue_controller`` (the control driver's,
    shared by the drivers of one process) forget ``copies``' copy."""
    watched = getattr(queue_controller, '_zaqar_delay_copies', None)
    if watched is None:
        watched = weakref.WeakSet()
        for name in WRITES:
            setattr(queue_controller, name,
                    _forgetting(getattr(queue_controller, name), watched))
        queue_controller._zaqar_delay_copies = watched
    watched.add(copies)


def _forgetting(write, watched):
    signature = inspect.signature(write)

    @functools.wraps(write)
    def forgetting(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        name = bound.arguments['name']
        project = bound.arguments.get('project')

        def forget():
            for copies in list(watched):
                copies.forget(name, project)
        forget()
        try:
            return write(*args, **kwargs)
        finally:
            forget()
    return forgetting
