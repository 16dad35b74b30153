"""Queue pipeline stage shared by every zaqar-delay data driver.

Zaqar asks a data driver for queue stats, and tells it about queue creation,
metadata changes and deletion, through stages registered under
``<driver module>.queue.stages`` (and the same for topics under
``.topic.stages``); these are the stages each of our drivers registers
there. A stage method that returns None lets the pipeline go on
to the next stage (finally Zaqar's queue controller); one that raises stops
it, so refused metadata is never stored.
"""

from zaqar.storage import base as storage_base
from zaqar.storage import errors as storage_errors

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
        that what the caller does with it cannot reach a cache. None (the
        control store answers) without copies, as with pooling."""
        if self._driver.metadata_copies is None:
            return None
        return dict(self._messages.queue_metadata(name, project))


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
