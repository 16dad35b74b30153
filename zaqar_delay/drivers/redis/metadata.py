"""Redis' copies of queue metadata (zaqar_delay/metadata_copy.py).

``Q:meta`` holds the copy (the metadata as JSON, in the queue's hash
tag), ``Q:metagen`` its generation; both are read in one ``MGET``.
``meta_fill`` stores a copy only if the generation is the one read with
the miss; ``meta_forget`` bumps the generation and deletes the copy. See
docs/redis.md, *Round trips per call*.
"""

import json

from zaqar_delay import metadata_copy
from zaqar_delay.drivers.redis import keys
from zaqar_delay.drivers.redis import wire


class RedisCopies(metadata_copy.Copies):

    def __init__(self, driver):
        self._driver = driver

    def find(self, queue, project):
        prefix = keys.queue_prefix(queue, project)
        copy, gen = self._driver.guarded(lambda: self._driver.connection.mget(
            prefix + ':meta', prefix + ':metagen'))
        return (None if copy is None else json.loads(copy),
                None if gen is None else wire.text(gen))

    def fill(self, queue, project, generation, metadata):
        # A copy, not an acknowledged write: no replica_acks WAIT for it.
        self._driver.guarded(lambda: self._driver.scripts.run(
            'meta_fill', queue, project,
            '' if generation is None else generation, json.dumps(metadata),
            metadata_copy.COPY_TTL_MS))

    def forget(self, queue, project):
        self._driver.run_script('meta_forget', queue, project,
                                metadata_copy.GENERATION_TTL_MS)
