"""The switch-over end to end, as an operator does it: ``zaqar-server`` on
one of Zaqar's OWN drivers filled over HTTP with plain, delayed and
claimed messages and a subscription; stopped; ``zaqar-delay-migrate``
killed halfway and run again; ``zaqar-server`` started on ours; every
message then read over HTTP exactly once. From Zaqar's Redis driver into
``delay.redis`` on the same redis-server, and from Zaqar's Swift driver
into ``delay.swift`` in the same Swift account, both through Keystone
(Zaqar's Swift driver speaks nothing else): a real Keystone, and the test
Swift with keystonemiddleware's ``authtoken`` and Swift's
``keystoneauth``."""

import math
import time
import uuid

import pytest
import requests

from tests.migrate.conftest import kill_after
from tests.migrate.conftest import migrate_command
from tests.migrate.conftest import run_to_the_end
from localstack import zaqar_server

pytestmark = [pytest.mark.integration, pytest.mark.keystone]

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


class FromRedis:
    """Zaqar's own Redis driver, then ``delay.redis``, on one server."""

    # Zaqar's Redis claims the oldest free messages first.
    claims_oldest = True

    def __init__(self, redis_url):
        self.old_store = ('redis', {'uri': redis_url})
        self.source_uri = redis_url
        self.new_store = ('delay.redis', {
            'uri': redis_url.replace('redis://', 'delay.redis://')})
        self.new_config = {}

    def ttl_slack(self, post_seconds):
        """How much longer than posted a moved message's ttl may be."""
        return 0


SWIFT_USER = 'zaqar'      # a Keystone project and its member, owner of
SWIFT_PASSWORD = 'zaqar-swift'   # account KEY_<project id> on the Swift


class FromSwift:
    """Zaqar's own Swift driver, then ``delay.swift``, in one Keystone
    Swift account."""

    # Zaqar's Swift claims in name order, and a uuid1's text starts with
    # the low bits of its clock.
    claims_oldest = False

    def __init__(self, keystone_url):
        credentials = '{}:{}@/{}'.format(SWIFT_USER, SWIFT_PASSWORD,
                                         SWIFT_USER)
        self.source_uri = 'swift://' + credentials
        self.old_store = ('swift', {'uri': self.source_uri,
                                    'auth_url': keystone_url})
        self.new_store = ('delay.swift', {
            'uri': 'delay.swift://' + credentials, 'auth_url': keystone_url})
        # The old store's section stays for the command (docs/migration.md
        # step 2): its auth_url.
        self.new_config = {'extra': '[drivers:message_store:swift]\n'
                                    'auth_url = {}\n'.format(keystone_url)}

    def ttl_slack(self, post_seconds):
        """Swift expires an object at whole seconds from its PUT, and a
        claim PUTs it again with its whole ttl: the moved ttl (from the
        id's clock to that expiry) grows by up to the posting time."""
        return math.ceil(post_seconds)


@pytest.fixture(scope='module')
def keystone_swift(keystone, keystone_swift):
    """The session's Keystone Swift, with this module's member."""
    keystone.create_member(SWIFT_USER, SWIFT_PASSWORD)
    return keystone_swift


@pytest.fixture(params=['redis', 'swift'],
                ids=['redis-to-delay.redis', 'swift-to-delay.swift'])
def stores(request, own_redis):
    """The old store, the command's source URI and the new store."""
    if request.param == 'redis':
        return FromRedis(own_redis.url)
    request.getfixturevalue('keystone_swift')
    return FromSwift(request.getfixturevalue('keystone').url)


def post_all(api, claims_oldest):
    """Post what the old server will hold; returns the ids by kind and
    the old claim."""
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
    held = [m['id'] for m in held]
    if claims_oldest:
        assert held == plain[:CLAIMED]
    else:
        assert len(set(held) & set(plain)) == CLAIMED
    api.call('POST', api.queue_url + '/subscriptions', 201,
             json={'subscriber': SUBSCRIBER, 'ttl': 3600,
                   'options': {'k': 'v'}})
    return plain, soon, later, old_claim


def claim_everything(api, expected, deadline_s=60):
    """Claim until ``expected`` messages came (the delayed-soon ones when
    due); every claimed message once, in the order handed out, with the
    times its claim was asked and answered (its age is of a moment
    between)."""
    got = []
    deadline = time.monotonic() + deadline_s
    while len(got) < expected and time.monotonic() < deadline:
        asked = time.time()
        claim_id, messages = api.claim(20)
        got += [(claim_id, m, (asked, time.time())) for m in messages]
        if not messages:
            time.sleep(0.2)
    return got


def test_switch_from_zaqars_own_store_over_http(own_redis, stores, project):
    old = zaqar_server.ZaqarServer(own_redis.url, *stores.old_store).start()
    try:
        before_post = time.time()
        plain, soon, later, old_claim = post_all(Api(old.url, project),
                                                 stores.claims_oldest)
        after_post = time.time()
    finally:
        old.stop()
    ttl_slack = stores.ttl_slack(after_post - before_post)

    new = zaqar_server.ZaqarServer(own_redis.url, *stores.new_store,
                                   **stores.new_config)
    command = migrate_command(new.config, stores.source_uri, project,
                              batch=4)
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
        ids = [m['id'] for _, m, _ in got]
        # Exactly once each; the released claimed ones free again, all
        # in age order (posting order); the far-delayed ones not yet.
        assert sorted(ids) == sorted(plain + soon)
        assert ids == plain + soon
        bodies = [m['body'] for _, m, _ in got]
        assert bodies == [{'n': n} for n in range(PLAIN)] + [
            {'soon': n} for n in range(SOON)]
        # Ages kept: counted from the first post, not from the move.
        for _, message, (asked, answered) in got:
            assert 300 <= message['ttl'] <= 300 + ttl_slack
            assert asked - after_post - 1 <= message['age'] <= \
                answered - before_post + 1
        stats = api.call('GET', api.queue_url + '/stats',
                         200).json()['messages']
        assert (stats['total'], stats['claimed'], stats['delayed']) == (
            total, PLAIN + SOON, LATER)
        # The far-delayed ones: held with their ttl, not claimable.
        listed = api.call('GET', api.queue_url + '/messages', 200,
                          params={'ids': later}).json()['messages']
        assert sorted(m['id'] for m in listed) == sorted(later)
        assert all(900 <= m['ttl'] <= 900 + ttl_slack for m in listed)
        assert api.claim(20) == (None, [])

        for _, message, _ in got:
            api.call('DELETE', message['href'], 204)
        api.call('DELETE', api.queue_url + '/messages', 204,
                 params={'ids': later})
        stats = api.call('GET', api.queue_url + '/stats',
                         200).json()['messages']
        assert stats['total'] == 0
    finally:
        new.stop()
