"""A copy of each queue's metadata in the data store (issue 21).

Every post, claim and listing needs the queue's policy, which lives in
Zaqar's control store (two round trips with Zaqar's Redis control
driver). The driver keeps a copy, ``Q:meta`` (the metadata as JSON, in
the queue's hash tag), and reads it in one round trip with the
generation ``Q:metagen``. The copy stays exact because every write to the
control store's queue controller in this process forgets it
(``meta_forget``: bump the generation, delete the copy) before and after
the write, and a copy is filled only on a miss, only if the generation
has not moved since the miss (``meta_fill``), so a fill that read the
control store before a change never lands after that change forgot the
copy. A copy expires after COPY_TTL_MS, which bounds how long a copy may
be stale when the forgetting after a write failed (Redis lost between
the two) or the control store was written by a process without this
driver.

Not used with pooling: Zaqar then writes queue metadata through its
management store from API nodes that may not have loaded this driver
yet (it loads a pool's driver at the first message call), so a write
could go unnoticed. See docs/redis.md, *Round trips per call*.
"""

import functools
import inspect
import json
import weakref

from zaqar_delay.drivers.redis import keys
from zaqar_delay.drivers.redis import wire

COPY_TTL_MS = 60 * 1000
# The control store's queue controller methods that change a queue.
WRITES = ('create', 'set_metadata', 'delete')


def read(driver, queue, project, from_control_store):
    """The queue's metadata: the copy, or ``from_control_store()`` (which
    raises QueueDoesNotExist for a queue that is not), copied."""
    prefix = keys.queue_prefix(queue, project)
    copy, gen = driver.guarded(lambda: driver.connection.mget(
        prefix + ':meta', prefix + ':metagen'))
    if copy is not None:
        return json.loads(copy)
    metadata = from_control_store()
    # A copy, not an acknowledged write: no replica_acks WAIT for it.
    driver.guarded(lambda: driver.scripts.run(
        'meta_fill', queue, project, '' if gen is None else wire.text(gen),
        json.dumps(metadata), COPY_TTL_MS))
    return metadata


def watch(queue_controller, driver):
    """Make every write of ``queue_controller`` (the control driver's,
    shared by the drivers of one process) forget ``driver``'s copy."""
    drivers = getattr(queue_controller, '_zaqar_delay_copies', None)
    if drivers is None:
        drivers = weakref.WeakSet()
        for name in WRITES:
            setattr(queue_controller, name,
                    _forgetting(getattr(queue_controller, name), drivers))
        queue_controller._zaqar_delay_copies = drivers
    drivers.add(driver)


def _forgetting(write, drivers):
    signature = inspect.signature(write)

    @functools.wraps(write)
    def forgetting(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        name = bound.arguments['name']
        project = bound.arguments.get('project')

        def forget():
            for driver in list(drivers):
                driver.run_script('meta_forget', name, project)
        forget()
        try:
            return write(*args, **kwargs)
        finally:
            forget()
    return forgetting
