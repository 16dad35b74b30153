"""MongoDB's copies of queue metadata (zaqar_delay/metadata_copy.py).

Collection ``queue_meta``, one document per queue whose metadata was
read or changed: ``_id`` the queue's key (JSON text of ``[project,
queue]``), ``gen`` the generation, ``m`` the copy (the metadata as JSON
text), ``ce`` when the copy stops being used (epoch ms, store clock) and
``nc`` whether the queue had no persistent consumer when it was copied,
all absent when there is no copy; ``x`` when MongoDB's TTL monitor
removes the document (a day after its last change, as a date). One
``find_one`` by ``_id`` reads copy and generation; a fill is a
conditional write on the generation read with the miss; a forget bumps
the generation and unsets the copy. A get reads the document joined to
its messages instead (messages.py, ``_get_by_ids``). See
docs/mongodb.md, *Requests per call*.
"""

import datetime
import json
import threading

from pymongo import errors as mongo_errors

from zaqar_delay import metadata_copy
from zaqar_delay.drivers.mongodb import consumers as consumer_state
from zaqar_delay.drivers.mongodb import fields as f


def key(queue, project):
    return json.dumps([project, queue])


def _removal_time():
    return datetime.datetime.utcnow() + datetime.timedelta(
        milliseconds=metadata_copy.GENERATION_TTL_MS)


class MongoCopies(metadata_copy.Copies):
    """Each copy also says whether its queue had no persistent consumer
    when it was filled, exact as the metadata is: creating a consumer
    forgets the copy before and after (subscriptions.py), so a fill that
    counted before that never lands. A listing that finds it says so
    skips looking its client up as a consumer (``without_consumers``)."""

    def __init__(self, driver):
        self._driver = driver
        # (queue, project, no consumers) of this thread's last copy read.
        self._seen = threading.local()

    @property
    def _docs(self):
        return self._driver.queue_meta

    def find(self, queue, project):
        return self.read(self._docs.find_one({'_id': key(queue, project)}),
                         queue, project)

    def read(self, doc, queue, project):
        """``find``'s answer from the queue's document (None if none)."""
        copy = generation = None
        if doc is not None:
            generation = doc[f.META_GEN]
            if f.META_COPY in doc and \
                    doc[f.META_COPY_ENDS] > self._driver.now():
                copy = json.loads(doc[f.META_COPY])
        self._seen.last = (queue, project, copy is not None
                           and doc.get(f.META_NO_CONSUMERS) is True)
        return copy, generation

    def without_consumers(self, queue, project):
        """Whether this thread's last read of a copy was of ``queue``'s
        and found it had no persistent consumer."""
        return getattr(self._seen, 'last', None) == (queue, project, True)

    def fill(self, queue, project, generation, metadata):
        no_consumers = not consumer_state.any_live(self._driver, queue,
                                                   project)
        copy = {f.META_COPY: json.dumps(metadata),
                f.META_COPY_ENDS: self._driver.now()
                + metadata_copy.COPY_TTL_MS,
                f.META_NO_CONSUMERS: no_consumers}
        if generation is not None:
            filled = self._docs.update_one(
                {'_id': key(queue, project), f.META_GEN: generation},
                {'$set': copy}).matched_count == 1
        else:
            try:
                self._docs.insert_one(dict(
                    copy, _id=key(queue, project), **{
                        f.META_GEN: 0, f.META_REMOVED_AT: _removal_time()}))
                filled = True
            except mongo_errors.DuplicateKeyError:
                filled = False   # a forget came in between: stale
        self._seen.last = (queue, project, filled and no_consumers)

    def forget(self, queue, project):
        change = {'$inc': {f.META_GEN: 1},
                  '$unset': {f.META_COPY: '', f.META_COPY_ENDS: '',
                             f.META_NO_CONSUMERS: ''},
                  '$set': {f.META_REMOVED_AT: _removal_time()}}
        try:
            self._docs.update_one({'_id': key(queue, project)}, change,
                                  upsert=True)
        except mongo_errors.DuplicateKeyError:
            # Two first forgets raced on the upsert; the loser's
            # update now finds the document.
            self._docs.update_one({'_id': key(queue, project)}, change)
