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
import functools
import inspect
import weakref

COPY_TTL_MS = 60 * 1000
# How long a generation outlives the last change of its queue: longer
# than any fill can take between its miss and its write.
GENERATION_TTL_MS = 24 * 3600 * 1000
# The control store's queue controller methods that change a queue.
WRITES = ('create', 'set_metadata', 'delete')


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


def read(copies, queue, project, from_control_store):
    """The queue's metadata: the copy, or ``from_control_store()`` (which
    raises QueueDoesNotExist for a queue that is not), copied."""
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
