"""The few Zaqar v2 calls the worker makes, through python-zaqarclient.

One zaqarclient ``Client`` is shared by every thread: it builds a new
request and transport for each call and keeps no per-call state.
"""

from zaqarclient.queues.v2 import client as zaqar_client
from zaqarclient.queues.v2 import core
from zaqarclient.transport import errors as transport_errors

# Zaqar's default max_messages_per_page: the most ids one GET may name.
PAGE = 20

NotFound = transport_errors.ResourceNotFound
# Raised when a message or claim is gone or no longer ours: the call is
# then moot, not failed.
GONE = (transport_errors.ResourceNotFound, transport_errors.ForbiddenError)
# Raised by a delete under a claim that ended: 400 when nobody holds the
# message now, 403 when another claim does.
NOT_OURS = (transport_errors.MalformedRequest, transport_errors.ForbiddenError)


class Connection:
    """Zaqar at ``url`` for one project: ``conf`` is python-zaqarclient's
    (Keystone or anything it supports); ``project`` alone means noauth."""

    def __init__(self, url, conf=None, project=None):
        if conf is None:
            conf = {'auth_opts': {'backend': 'noauth', 'options': {
                'os_project_id': project or 'default'}}}
        self.client = zaqar_client.Client(url, version=2, conf=conf)

    def queue(self, name):
        return self.client.queue(name, auto_create=False)

    def _call(self, function, *args, **kwargs):
        # zaqarclient's own way to call its core functions; Queue.metadata()
        # would drop every key it is not given, and stats on a missing
        # queue need the 404 to answer zeros.
        req, trans = self.client._request_and_transport()
        return function(trans, req, *args, **kwargs)

    def ensure_queue(self, name, metadata):
        """Create ``name`` if needed and set the given metadata keys, leaving
        other keys alone; a repeated call changes nothing."""
        self._call(core.queue_create, name, metadata=metadata)
        current = self._call(core.queue_get, name) or {}
        changes = [{'op': 'replace' if key in current else 'add',
                    'path': '/metadata/' + key, 'value': value}
                   for key, value in sorted(metadata.items())
                   if current.get(key) != value]
        if changes:
            self._call(core.queue_update, name, metadata=changes)

    def metadata(self, name):
        return self._call(core.queue_get, name) or {}

    def post(self, name, messages):
        """Post and return the new message ids, in order."""
        reply = self.queue(name).post(messages)
        return [href.rsplit('/', 1)[-1] for href in reply['resources']]

    def claim(self, name, limit, ttl, grace):
        """A zaqarclient Claim and its messages (empty list: none due)."""
        claim = self.queue(name).claim(ttl=ttl, grace=grace, limit=limit)
        return claim, list(claim)

    def stats(self, name):
        """Zaqar's ``messages`` stats; zeros for a queue that is not there."""
        try:
            return self._call(core.queue_get_stats, name)['messages']
        except NotFound:
            return {'free': 0, 'claimed': 0, 'delayed': 0, 'total': 0}

    def messages(self, name, limit=None):
        """Every live message of ``name``, claimed or not, page by page."""
        found = self.queue(name).messages(echo=True, include_claimed=True)
        for count, message in enumerate(found):
            if limit is not None and count >= limit:
                return
            yield message

    def get_many(self, name, ids):
        """The messages among ``ids`` that exist (Zaqar answers 404 when
        none of a page does)."""
        out = []
        for start in range(0, len(ids), PAGE):
            try:
                out.extend(self.queue(name).messages(
                    *ids[start:start + PAGE]))
            except NotFound:
                pass
        return out

    def delete(self, name, message_id, claim_id=None):
        self._call(core.message_delete, name, message_id, claim_id)
