"""Redis' copies of queue metadata (zaqar_delay/metadata_copy.py).

``Q:meta`` holds the copy (the metadata as JSON, in the queue's hash
tag), ``Q:metagen`` its generation; ``meta_read`` reads both, and how
long each lasts, in one request. ``meta_fill`` stores a copy only if the
generation is the one read with the miss; ``meta_forget`` bumps the
generation and deletes the copy. Each process also keeps the copies it
read (metadata_copy.ProcessCache): every queue script checks the
generation it is sent before it acts (scripts.py), so a call served from
that cache is one round trip. See docs/redis.md, *Round trips per call*.
"""

import json

from zaqar_delay import metadata_copy
from zaqar_delay.drivers.redis import keys
from zaqar_delay.drivers.redis import wire


class RedisCopies(metadata_copy.Copies):

    def __init__(self, driver):
        self._driver = driver
        self.process_cache = metadata_copy.ProcessCache()

    def find(self, queue, project):
        copy, gen, lasts_ms = self._driver.guarded(
            lambda: self._driver.scripts.run('meta_read', queue, project))
        gen = wire.text(gen) or None
        if not copy:
            return None, gen
        text_digest = metadata_copy.digest(copy)
        metadata = self.process_cache.unchanged(queue, project, gen or '',
                                                text_digest)
        if metadata is None:
            metadata = json.loads(copy)
        if lasts_ms > 0:
            self.process_cache.put(queue, project, metadata, gen or '',
                                   lasts_ms, text_digest=text_digest)
        return metadata, gen

    def fill(self, queue, project, generation, metadata):
        # A copy, not an acknowledged write: no replica_acks WAIT for it.
        self._driver.guarded(lambda: self._driver.scripts.run(
            'meta_fill', queue, project,
            '' if generation is None else generation, json.dumps(metadata),
            metadata_copy.COPY_TTL_MS))

    def forget(self, queue, project):
        self.process_cache.drop(queue, project)
        self._driver.run_script('meta_forget', queue, project,
                                metadata_copy.GENERATION_TTL_MS)

    def current(self, queue, project, generation):
        found = self._driver.guarded(lambda: self._driver.connection.get(
            keys.queue_prefix(queue, project) + ':metagen'))
        return ('' if found is None else wire.text(found)) == generation
