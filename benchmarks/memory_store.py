"""The ceiling of the end-to-end benchmark (benchmarks/e2e.py): a Zaqar
message store made of a few dicts in the ``zaqar-server`` process.

No durability and no guarantees: a claim never expires, a delete does not
check its claim, messages never expire, nothing but post, claim and
delete works. It costs about nothing per message, so Zaqar's API layer
is all a request through it costs: about the most any driver can give
through Zaqar's API. Benchmark code only; benchmarks/e2e.py registers it
as the data store ``bench.memory`` in the server's environment alone.
"""

import collections
import heapq
import time
import uuid

from zaqar import storage


class QueueStage:
    """Zaqar's transport reads a queue's metadata before every post; our
    queue stage answers from the data store's copy, one round trip, so
    this one answers from a dict, none: without it the ceiling would pay
    the control store's two round trips that ours does not. Kept until
    this process changes or deletes the queue (no other process is
    seen: benchmark code)."""

    def __init__(self, driver, control_driver):
        self._control = control_driver.queue_controller
        self._known = {}

    def get_metadata(self, name, project=None):
        key = (project, name)
        if key not in self._known:
            self._known[key] = self._control.get_metadata(name, project)
        return dict(self._known[key])

    # Each returns None, so Zaqar's queue controller then does the write.
    def create(self, name, metadata=None, project=None):
        self._known.pop((project, name), None)

    def set_metadata(self, name, metadata, project=None):
        self._known.pop((project, name), None)

    def delete(self, name, project=None):
        self._known.pop((project, name), None)


class _Queue:
    def __init__(self):
        self.messages = {}  # id -> message
        self.ready = collections.OrderedDict()  # claimable ids, in order
        self.delayed = []  # heap of (due, id)

    def release_due(self, now):
        while self.delayed and self.delayed[0][0] <= now:
            self.ready[heapq.heappop(self.delayed)[1]] = None


class DataDriver(storage.DataDriverBase):
    BASE_CAPABILITIES = ()

    def __init__(self, conf, cache, control_driver):
        super().__init__(conf, cache, control_driver)
        self.queues = collections.defaultdict(_Queue)
        self._messages = MessageController(self)
        self._claims = ClaimController(self)
        self._subscriptions = SubscriptionController(self)

    # Abstract properties of Zaqar's DataDriverBase.
    message_controller = property(lambda self: self._messages)
    claim_controller = property(lambda self: self._claims)
    subscription_controller = property(lambda self: self._subscriptions)

    @property
    def capabilities(self):
        return self.BASE_CAPABILITIES

    def is_alive(self):
        return True

    def _health(self):
        return {}

    def close(self):
        pass

    def queue(self, name, project):
        return self.queues[project, name]


def _unsupported(*args, **kwargs):
    raise NotImplementedError('not in the benchmark ceiling store')


class MessageController(storage.Message):
    list = first = get = bulk_get = bulk_delete = pop = _unsupported

    def post(self, queue, messages, client_uuid, project=None):
        store = self.driver.queue(queue, project)
        now = time.time()
        ids = []
        for message in messages:
            message_id = uuid.uuid4().hex
            store.messages[message_id] = {
                'id': message_id, 'ttl': message['ttl'],
                'body': message['body'], 'created': now}
            delay = message.get('delay', 0)
            if delay:
                heapq.heappush(store.delayed, (now + delay, message_id))
            else:
                store.ready[message_id] = None
            ids.append(message_id)
        return ids

    def delete(self, queue, message_id, project=None, claim=None):
        store = self.driver.queue(queue, project)
        store.messages.pop(message_id, None)
        store.ready.pop(message_id, None)


class ClaimController(storage.Claim):
    get = update = delete = _unsupported

    def create(self, queue, metadata, project=None, limit=10):
        store = self.driver.queue(queue, project)
        now = time.time()
        store.release_due(now)
        claimed = []
        while store.ready and len(claimed) < limit:
            message = store.messages[store.ready.popitem(last=False)[0]]
            claimed.append(dict(message, age=int(now - message['created'])))
        return uuid.uuid4().hex, claimed


class SubscriptionController(storage.Subscription):
    list = get = create = update = exists = delete = _unsupported
    get_with_subscriber = confirm = _unsupported
