"""MongoDB's copies of queue metadata (zaqar_delay/metadata_copy.py).

Collection ``queue_meta``, one document per queue whose metadata was
read or changed: ``_id`` the queue's key (JSON text of ``[project,
queue]``), ``gen`` the generation, ``m`` the copy (the metadata as JSON
text) and ``ce`` when the copy stops being used (epoch ms, store clock),
both absent when there is no copy; ``x`` when MongoDB's TTL monitor
removes the document (a day after its last change, as a date). One
``find_one`` by ``_id`` reads copy and generation; a fill is a
conditional write on the generation read with the miss; a forget bumps
the generation and unsets the copy. See docs/mongodb.md, *Requests per
call*.
"""

import datetime
import json

from pymongo import errors as mongo_errors

from zaqar_delay import metadata_copy
from zaqar_delay.drivers.mongodb import fields as f


def key(queue, project):
    return json.dumps([project, queue])


def _removal_time():
    return datetime.datetime.utcnow() + datetime.timedelta(
        milliseconds=metadata_copy.GENERATION_TTL_MS)


class MongoCopies(metadata_copy.Copies):

    def __init__(self, driver):
        self._driver = driver

    @property
    def _docs(self):
        return self._driver.queue_meta

    def find(self, queue, project):
        return self.read(self._docs.find_one({'_id': key(queue, project)}))

    def read(self, doc):
        """``find``'s answer from the queue's document (None if none)."""
        if doc is None:
            return None, None
        if f.META_COPY in doc and doc[f.META_COPY_ENDS] > self._driver.now():
            return json.loads(doc[f.META_COPY]), doc[f.META_GEN]
        return None, doc[f.META_GEN]

    def fill(self, queue, project, generation, metadata):
        copy = {f.META_COPY: json.dumps(metadata),
                f.META_COPY_ENDS: self._driver.now()
                + metadata_copy.COPY_TTL_MS}
        if generation is not None:
            self._docs.update_one(
                {'_id': key(queue, project), f.META_GEN: generation},
                {'$set': copy})
            return
        try:
            self._docs.insert_one(dict(
                copy, _id=key(queue, project), **{
                    f.META_GEN: 0, f.META_REMOVED_AT: _removal_time()}))
        except mongo_errors.DuplicateKeyError:
            pass  # a forget came in between: the copy would be stale

    def forget(self, queue, project):
        change = {'$inc': {f.META_GEN: 1},
                  '$unset': {f.META_COPY: '', f.META_COPY_ENDS: ''},
                  '$set': {f.META_REMOVED_AT: _removal_time()}}
        try:
            self._docs.update_one({'_id': key(queue, project)}, change,
                                  upsert=True)
        except mongo_errors.DuplicateKeyError:
            # Two first forgets raced on the upsert; the loser's
            # update now finds the document.
            self._docs.update_one({'_id': key(queue, project)}, change)
