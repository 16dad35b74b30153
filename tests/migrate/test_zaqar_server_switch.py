"""The switch-over end to end, as an operator does it: ``zaqar-server`` on
Zaqar's OWN Redis driver filled over HTTP with plain, delayed and claimed
messages and a subscription; stopped; ``zaqar-delay-migrate`` killed
halfway and run again; ``zaqar-server`` started on ``delay.redis`` over
the same redis-server; every message then read over HTTP exactly once."""

import time
import uuid

import pytest
import requests

from tests.migrate.conftest import kill_after
from tests.migrate.conftest import migrate_command
from tests.migrate.conftest import run_to_the_end
from localstack import zaqar_server

pytestmark = pytest.mark.integration

PLAIN = 30          # the oldest CLAIMED of them are claimed before the move
CLAIMED = 4
SOON = 3            # the queue's default delay, 4 s: due soon after
LATER = 3           # delayed 600 s: still delayed after the move
SUBSCRIBER = 'http://127.0.0.1:9/hook'


class Api:
    """Zaqar's v2 HTTP API for one project and queue."""

    def __init__(self, url, project, queue='orders'):
        self.queue_url = '{}/v2/queues/{}'.format(url, queue)
        self.url = url
        self.session = requests.Session()
        self.session.headers.update({'Client-ID': str(uuid.uuid4()),
                                     'X-Project-ID': project})

    def call(self, method, path, expect, **kwargs):
        url = path if path.startswith('http') else self.url + path
        response = self.session.request(method, url, **kwargs)
        assert response.status_code == expect, (method, path,
                                                response.text)
        return response

    def post(self, messages):
        response = self.call('POST', self.queue_url + '/messages', 201,
                             json={'messages': messages})
        return [href.rsplit('/', 1)[1]
                for href in response.json()['resources']]

    def claim(self, limit, ttl=60, grace=60):
        """(claim id, messages), or (None, []) when nothing is free."""
        response = self.session.post(self.queue_url + '/claims',
                                     params={'limit': limit},
                                     json={'ttl': ttl, 'grace': grace})
        if response.status_code == 204:
            return None, []
        assert response.status_code == 201, response.text
        return (response.headers['Location'].rsplit('/', 1)[1],
                response.json()['messages'])


def post_all(api):
    """Post what the old server will hold; returns the ids by kind."""
    # Zaqar honours a message's delay only on a queue with a default one.
    api.call('PUT', api.queue_url, 201, json={'_default_message_delay': 4})
    plain = []
    for start in range(0, PLAIN, 10):
        plain += api.post([{'ttl': 300, 'delay': 0, 'body': {'n': n}}
                           for n in range(start, start + 10)])
    soon = api.post([{'ttl': 300, 'body': {'soon': n}}
                     for n in range(SOON)])
    later = api.post([{'ttl': 900, 'delay': 600, 'body': {'later': n}}
                      for n in range(LATER)])
    old_claim, held = api.claim(CLAIMED)
    assert [m['id'] for m in held] == plain[:CLAIMED]
    api.call('POST', api.queue_url + '/subscriptions', 201,
             json={'subscriber': SUBSCRIBER, 'ttl': 3600,
                   'options': {'k': 'v'}})
    return plain, soon, later, old_claim


def claim_everything(api, expected, deadline_s=60):
    """Claim until ``expected`` messages came (the delayed-soon ones when
    due); every claimed message once, in the order handed out."""
    got = []
    deadline = time.monotonic() + deadline_s
    while len(got) < expected and time.monotonic() < deadline:
        claim_id, messages = api.claim(20)
        got += [(claim_id, m) for m in messages]
        if not messages:
            time.sleep(0.2)
    return got


def test_switch_from_zaqar_redis_to_delay_redis_over_http(own_redis,
                                                          project):
    old = zaqar_server.ZaqarServer(own_redis.url, 'redis',
                                   {'uri': own_redis.url}).start()
    try:
        before_post = time.time()
        plain, soon, later, old_claim = post_all(Api(old.url, project))
        after_post = time.time()
    finally:
        old.stop()

    new = zaqar_server.ZaqarServer(
        own_redis.url, 'delay.redis',
        {'uri': own_redis.url.replace('redis://', 'delay.redis://')})
    command = migrate_command(new.config, own_redis.url, project, batch=4)
    kill_after(command, moved_batches=3)
    out = run_to_the_end(command)
    total = PLAIN + SOON + LATER
    assert '{} messages (0 expired, skipped), 1 subscriptions, {} ' \
        'verified, 0 differences'.format(total, total) in out

    new.start()
    try:
        api = Api(new.url, project)
        # The old claim is gone: its holder gets "not found".
        api.call('GET', api.queue_url + '/claims/' + old_claim, 404)
        [sub] = api.call('GET', api.queue_url + '/subscriptions',
                         200).json()['subscriptions']
        assert (sub['subscriber'], sub['options']) == (SUBSCRIBER,
                                                       {'k': 'v'})
        assert 3600 - (time.time() - before_post) - 1 <= \
            sub['ttl'] - sub['age'] <= 3600

        got = claim_everything(api, PLAIN + SOON)
        ids = [m['id'] for _, m in got]
        # Exactly once each; the released claimed ones free again, all
        # in age order (posting order); the far-delayed ones not yet.
        assert sorted(ids) == sorted(plain + soon)
        assert ids == plain + soon
        bodies = [m['body'] for _, m in got]
        assert bodies == [{'n': n} for n in range(PLAIN)] + [
            {'soon': n} for n in range(SOON)]
        # Ages kept: counted from the first post, not from the move.
        now = time.time()
        for _, message in got:
            assert message['ttl'] == 300
            assert now - after_post - 1 <= message['age'] <= \
                now - before_post + 1
        stats = api.call('GET', api.queue_url + '/stats',
                         200).json()['messages']
        assert (stats['total'], stats['claimed'], stats['delayed']) == (
            total, PLAIN + SOON, LATER)
        # The far-delayed ones: held with their ttl, not claimable.
        listed = api.call('GET', api.queue_url + '/messages', 200,
                          params={'ids': later}).json()['messages']
        assert sorted((m['id'], m['ttl']) for m in listed) == sorted(
            (mid, 900) for mid in later)
        assert api.claim(20) == (None, [])

        for claim_id, message in got:
            api.call('DELETE', message['href'], 204)
        api.call('DELETE', api.queue_url + '/messages', 204,
                 params={'ids': later})
        stats = api.call('GET', api.queue_url + '/stats',
                         200).json()['messages']
        assert stats['total'] == 0
    finally:
        new.stop()
