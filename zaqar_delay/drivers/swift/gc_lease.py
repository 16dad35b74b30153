"""One ``zaqar-delay-gc`` pass at a time per Swift account: a lease.

Most gc steps are idempotent or conditional creates, but one is not safe
against a second gc: a pass removing a dead-letter copy cut short in its
target queue as a draft while another pass, finishing the source queue's
abandoned move, files that copy, can leave it filed with its message gone
(docs/swift.md). So a pass first creates the lease object ``zd:gc/lease``
(``If-None-Match: *``, read back after ``create_settle_time`` as every
single-creator object: connection.Store.create) holding its owner token,
expiring by ``X-Delete-After`` LEASE_S after its last renewal, so a gc
that died frees it. Before each queue and each retention batch the pass
renews it, once RENEW_AFTER_S have passed, after checking that the token
is still its own; a pass whose lease was taken stops there. A pass that
finds the lease held does nothing and raises errors.GcPassRunning, naming
the holder.
"""

import json
import os
import socket
import time
import uuid

from zaqar_delay import errors
from zaqar_delay.drivers.swift import connection

# Not under names.container_prefix(MESSAGES): gc never takes it for a queue.
CONTAINER = 'zd:gc'
OBJECT = 'lease'
# A holder that died blocks other passes at most this long; a live one
# renews long before, so one queue's step never outlasts it.
LEASE_S = 300
RENEW_AFTER_S = 30


def _holder(found):
    """"host h, pid p, since <UTC>" from a lease object's body."""
    try:
        holder = json.loads(found[1])
        return 'host {}, pid {}, since {} UTC'.format(
            holder['host'], holder['pid'], time.strftime(
                '%Y-%m-%d %H:%M:%S', time.gmtime(holder['since'])))
    except (TypeError, ValueError, KeyError):
        return 'holder unknown'


class GcLease:

    def __init__(self, store, clock=time.monotonic):
        self.store = store
        self.clock = clock
        self.token = None
        self.renewed = None

    def _refused(self, why):
        found = self.store.get(CONTAINER, OBJECT)
        return errors.GcPassRunning(
            '{} another zaqar-delay-gc pass holds the gc lease of this Swift '
            'account ({}; object {}/{}): only one pass runs at a time, so '
            'this one stops. A holder that died frees it within {} s.'.format(
                why, _holder(found) if found else 'just released',
                CONTAINER, OBJECT, LEASE_S))

    def acquire(self):
        token = uuid.uuid4().hex
        body = json.dumps({'host': socket.gethostname(), 'pid': os.getpid(),
                           'since': time.time()}).encode()
        if not self.store.create(CONTAINER, OBJECT, body, token=token,
                                 headers={'X-Delete-After': str(LEASE_S)},
                                 recreate=True):
            raise self._refused('Not started:')
        self.token, self.renewed = token, self.clock()

    def _ours(self):
        found = self.store.head(CONTAINER, OBJECT)
        return (found is not None
                and found.get(connection.OWNER.lower()) == self.token)

    def keep(self):
        """Renew the lease if due; raise GcPassRunning if it was taken."""
        if self.clock() - self.renewed < RENEW_AFTER_S:
            return
        if not self._ours() or not self.store.post(
                CONTAINER, OBJECT, {connection.OWNER: self.token,
                                    'X-Delete-After': str(LEASE_S)}):
            raise self._refused('Stopped between two queues:')
        self.renewed = self.clock()

    def release(self):
        if self.token is not None and self._ours():
            self.store.delete(CONTAINER, OBJECT)
        self.token = None
