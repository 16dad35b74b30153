"""zaqar-tempest-plugin's v2 messaging client, plus the calls it lacks.

Its own methods fix the request (no queue metadata on create, no listing
parameters, claims without a limit); these add what our tests need and
reuse its headers, URI prefix and response schemas.
"""

import urllib

from oslo_serialization import jsonutils as json
from zaqar_tempest_plugin.api_schema.response.v2 import queues as v2schema
from zaqar_tempest_plugin.services.messaging.json import messaging_client


class DelayMessagingClient(messaging_client.V2MessagingClient):

    def _queue_uri(self, queue_name, *parts):
        return '/'.join((self.uri_prefix, 'queues', queue_name) + parts)

    @staticmethod
    def relative(href):
        """A Zaqar href ("/v2/...") as a path for this client."""
        return href.lstrip('/')

    def create_queue_with_metadata(self, queue_name, metadata):
        resp, body = self.put(self._queue_uri(queue_name),
                              body=json.dumps(metadata),
                              headers=self.headers)
        self.expected_success(201, resp.status)
        return resp, body

    def list_messages_with(self, queue_name, **params):
        """List with query parameters (``include_delayed``, ``marker``)."""
        params.setdefault('echo', 'true')
        uri = '{}?{}'.format(self._queue_uri(queue_name, 'messages'),
                             urllib.parse.urlencode(params))
        resp, body = self.get(uri, headers=self.headers)
        body = json.loads(body)
        self.validate_response(v2schema.list_messages, resp, body)
        return resp, body

    def claim(self, queue_name, ttl=60, grace=60, limit=10):
        """Claim; returns (claim href, messages), ``(None, [])`` on 204."""
        uri = '{}?limit={}'.format(self._queue_uri(queue_name, 'claims'),
                                   limit)
        resp, body = self.post(uri, body=json.dumps({'ttl': ttl,
                                                     'grace': grace}),
                               headers=self.headers)
        if resp.status == 204:
            return None, []
        body = json.loads(body)
        self.validate_response(v2schema.claim_messages, resp, body)
        return resp['location'], body['messages']
