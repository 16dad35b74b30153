"""Queue pipeline stage shared by every zaqar-delay data driver.

Zaqar asks a data driver for queue stats, and tells it about queue creation,
metadata changes and deletion, through stages registered under
``<driver module>.queue.stages`` (and the same for topics under
``.topic.stages``); these are the stages each of our drivers registers
there. A stage method that returns None lets the pipeline go on
to the next stage (finally Zaqar's queue controller); one that raises stops
it, so refused metadata is never stored.
"""

import copy

from zaqar.common import errors as zaqar_errors
from zaqar.storage import base as storage_base
from zaqar.storage import errors as storage_errors
from zaqar.storage import utils as storage_utils

from zaqar_delay import control_store
from zaqar_delay import errors


class _Stage:

    def __init__(self, driver, control_driver):
        self._driver = driver

    @property
    def _messages(self):
        return self._driver.message_controller

    def create(self, name, metadata=None, project=None):
        try:
            self._messages.check_metadata(name, metadata, project)
        except errors.InvalidInput as exc:
            raise errors.RefusedQueueAttributes(str(exc))

    def set_metadata(self, name, metadata, project=None):
        self._messages.check_metadata(name, metadata, project)

    def delete(self, name, project=None):
        # Returning None lets the pipeline go on to delete the metadata.
        self._messages._purge_queue(name, project)

    def stats(self, name, project=None):
        with control_store.reached():
            exists = self._driver.queue_controller.exists(name,
                                                          project=project)
        if not exists:
            raise storage_errors.QueueDoesNotExist(name, project)
        return self._messages.stats(name, project)


class QueueStage(_Stage):

    def get_metadata(self, name, project=None):
        """The queue's metadata from the data store's exact copy, where
        the driver keeps one (metadata_copy.py), instead of the control
        store: Zaqar's transport reads it before every post. A copy, so
        that what the caller does with it cannot reach the process's
        cache, which keeps handing out the object while the copy is
        unchanged; nested values copied too. None (the control store
        answers) without copies, as with pooling."""
        if self._driver.metadata_copies is None:
            return None
        return {key: copy.deepcopy(value)
                if isinstance(value, (dict, list)) else value
                for key, value in self._messages.queue_metadata(
                    name, project).items()}


class TopicStage(_Stage):
    """The same stage for topics (``<driver module>.topic.stages``): a
    topic's metadata lives in Zaqar's topic controller, not its queue
    controller (so it is not read from the queue copies), and stats of a
    topic that does not exist is Zaqar's TopicDoesNotExist (its transport
    answers an empty 200), not a 404."""

    def stats(self, name, project=None):
        with control_store.reached():
            exists = self._driver.topic_controller.exists(name,
                                                          project=project)
        if not exists:
            raise storage_errors.TopicDoesNotExist(name, project)
        return self._messages.stats(name, project)


class PoolingQueueStage:
    """``zaqar.storage.pooling.queue.stages``: with pooling, Zaqar's
    pooling queue controller writes queue creates and metadata changes to
    the management store itself, and no pool's pipeline (QueueStage)
    sees them. This stage checks them as QueueStage does, with the driver
    of the pool the queue is in, or for a queue not placed yet with one
    of the pools its flavor (or the default group) offers, when that
    pool is one of ours; queues on other drivers' pools pass unchecked.
    Every pool reads one configuration (Zaqar reuses its config object),
    so any of our pools judges the same. It reads the catalogue only, and
    changes nothing: Zaqar places the queue after it. A pool is known for
    ours by the driver class its URI names, before any driver is built:
    Zaqar's own Redis and MongoDB drivers connect as they are built, and
    one of those pools down (even one Zaqar never places a queue on, of
    weight 0) failed the request."""

    def __init__(self, driver, control_driver):
        self._catalog = driver._pool_catalog

    def create(self, name, metadata=None, project=None):
        ours = self._judge(name, metadata, project)
        if ours is not None:
            _Stage(ours, None).create(name, metadata, project)

    def set_metadata(self, name, metadata, project=None):
        ours = self._judge(name, metadata, project)
        if ours is not None:
            _Stage(ours, None).set_metadata(name, metadata, project)

    def _judge(self, name, metadata, project):
        """One of our drivers that the queue is, or may be, stored on."""
        for pool in self._candidates(name, metadata, project):
            if _is_ours(pool['uri']):
                return self._catalog.get_driver(pool['name'])._storage
        return None

    def _candidates(self, name, metadata, project):
        """The pool the queue is in, or the pools its flavor offers."""
        catalog = self._catalog
        flavor = metadata.get('_flavor') if isinstance(metadata,
                                                       dict) else None
        if catalog._catalogue_ctrl.exists(project, name):
            placed = catalog._pools_ctrl.get(
                catalog._catalogue_ctrl.get(project, name)['pool'])
            if placed.get('flavor') == flavor:
                yield placed
                return
        try:
            yield from catalog._pools_ctrl.get_pools_by_flavor(
                flavor=flavor and catalog._flavor_ctrl.get(
                    flavor, project=project), detailed=True)
        except storage_errors.FlavorDoesNotExist:
            return      # Zaqar answers for that.


def _is_ours(uri):
    """Whether Zaqar loads one of our data drivers for a pool's ``uri``
    (by its scheme, as Zaqar does; the class only, nothing connects)."""
    from zaqar_delay import driver as zd_driver
    try:
        found = storage_utils.load_storage_impl(uri)
    except zaqar_errors.InvalidDriver:
        return False        # Zaqar answers for that.
    return isinstance(found, type) and issubclass(found, zd_driver.DataDriver)


class SubscriptionStage:
    """``<driver module>.subscription.stages``: Zaqar's REST API (and its
    websocket API) list a queue's subscriptions through the pipeline, and
    see every one, persistent consumers included. Zaqar's notifier lists
    them straight from the driver's controller on every post, and there
    each driver leaves the consumers out (they read by listing), so a
    post does not cost more per consumer."""

    def __init__(self, driver, control_driver):
        self._driver = driver

    def list(self, queue, project=None, marker=None,
             limit=storage_base.DEFAULT_SUBSCRIPTIONS_PER_PAGE):
        return self._driver.subscription_controller.list(
            queue, project=project, marker=marker, limit=limit,
            with_consumers=True)
