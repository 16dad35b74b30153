"""Zaqar's unchanged v2 REST API served on our drivers, over HTTP."""

import json

import pytest
import requests

pytestmark = pytest.mark.integration


def test_delayed_queue_end_to_end(client):
    assert client.call('PUT', '/queues/orders',
                       json={'_default_message_delay': 600}).status_code == 201
    reply = client.post('orders', {'ttl': 900, 'body': {'n': 'default'}},
                        {'ttl': 900, 'body': {'n': 'now'}, 'delay': 0},
                        {'ttl': 900, 'body': {'n': 'later'}, 'delay': 300})
    assert reply.status_code == 201, reply.text
    assert client.bodies('orders') == [{'n': 'now'}]
    assert client.bodies('orders', include_delayed='true') == [
        {'n': 'default'}, {'n': 'now'}, {'n': 'later'}]
    claimed = client.claim('orders')
    assert [m['body'] for m in claimed] == [{'n': 'now'}]
    assert client.claim('orders') == []
    stats = client.stats('orders')
    assert (stats['total'], stats['claimed'], stats['delayed']) == (3, 1, 2)
    href = claimed[0]['href']
    assert client.call('DELETE', href.replace('/v2', '', 1)).status_code == 204
    assert client.stats('orders')['total'] == 2


def test_claims_never_return_delayed_messages_when_interleaved(client):
    client.call('PUT', '/queues/mixed', json={'_default_message_delay': 600})
    for i in range(10):
        client.post('mixed', {'ttl': 900, 'body': 'ready-%d' % i, 'delay': 0},
                    {'ttl': 900, 'body': 'delayed-%d' % i})
    got = [m['body'] for m in client.claim('mixed', limit=20)]
    assert got == ['ready-%d' % i for i in range(10)]


def test_normal_queue_ignores_message_delay(client):
    client.call('PUT', '/queues/plain', json={})
    client.post('plain', {'ttl': 900, 'body': 'x', 'delay': 600})
    assert [m['body'] for m in client.claim('plain')] == ['x']


# Our check names the value too; it answers booleans (Zaqar's own lets
# them through as integers). Zaqar's check answers the rest first, naming
# the field (and, out of range, the bound) in its own words.
@pytest.mark.parametrize('bad', [-1, 901, True, False, 1.5, '5', None])
def test_bad_delay_over_rest_is_400_and_stores_nothing(client, bad):
    client.call('PUT', '/queues/strict', json={'_default_message_delay': 60})
    reply = client.post('strict', {'ttl': 900, 'body': 'good', 'delay': 0},
                        {'ttl': 900, 'body': 'bad', 'delay': bad})
    assert reply.status_code == 400, reply.text
    text = reply.json()['description'].lower()
    assert 'delay' in text
    if bad in (-1, 901):
        assert '900' in text
    if bad is True or bad is False:
        assert 'got ' + repr(bad).lower() in text
    assert client.bodies('strict', include_delayed='true') == []
    assert client.stats('strict')['total'] == 0


@pytest.mark.parametrize('bad', [-1, 901, True, False, 1.5, '5'])
def test_bad_default_delay_over_rest_is_400_and_makes_no_queue(client, bad):
    """A PUT of a queue with a bad ``_default_message_delay``: 400 naming
    the attribute, and no queue (docs/usage.md, *Delayed delivery*)."""
    reply = client.call('PUT', '/queues/baddelay',
                        json={'_default_message_delay': bad})
    assert reply.status_code == 400, reply.text
    text = reply.json()['description']
    assert '_default_message_delay' in text or 'TTL' in text
    if bad in (-1, 901):
        assert '900' in text
    if bad is True or bad is False:
        assert 'got ' + repr(bad) in text
    listed = client.call('GET', '/queues').json().get('queues', [])
    assert 'baddelay' not in [queue['name'] for queue in listed]


def test_a_put_of_an_existing_queue_checks_its_attributes_too(client):
    """Zaqar answers a PUT of a queue that exists 204 and leaves its
    metadata as it was; one whose attributes we refuse is answered 400
    naming the attribute (bad input gets a clear error: api-ref,
    queues.inc), and the queue keeps its metadata either way."""
    assert client.call('PUT', '/queues/again', json={
        '_default_message_delay': 30}).status_code == 201
    refused = client.call('PUT', '/queues/again',
                          json={'_retention': {'time': 'x'}})
    assert refused.status_code == 400, refused.text
    assert '_retention' in refused.json()['description']
    again = client.call('PUT', '/queues/again',
                        json={'_default_message_delay': 60})
    assert again.status_code == 204, again.text
    stored = client.call('GET', '/queues/again').json()
    assert stored['_default_message_delay'] == 30


def test_a_null_default_delay_is_no_default_delay(client):
    """``"_default_message_delay": null`` is the attribute unset: a normal
    queue, where a message's delay has no effect (as
    test_normal_queue_ignores_message_delay)."""
    reply = client.call('PUT', '/queues/nulldelay',
                        json={'_default_message_delay': None})
    assert reply.status_code == 201, reply.text
    client.post('nulldelay', {'ttl': 900, 'body': 'x', 'delay': 600})
    assert [m['body'] for m in client.claim('nulldelay')] == ['x']


@pytest.mark.parametrize('sticky,status', [(0, 400), (1, 201),
                                           (604800, 201), (604801, 400)])
def test_sticky_time_bounds_over_rest(client, sticky, status):
    """``_message_group_sticky`` takes 1 to 604800 seconds, literally."""
    reply = client.call('PUT', '/queues/sticky%d' % sticky, json={
        '_message_group_key': 'g', '_message_group_sticky': sticky})
    assert reply.status_code == status, reply.text
    if status == 400:
        assert '1 to 604800' in reply.json()['description']
        assert 'got %d' % sticky in reply.json()['description']


def test_dead_letter_queue_over_rest(client):
    client.call('PUT', '/queues/dlq', json={})
    client.call('PUT', '/queues/work', json={
        '_max_claim_count': 1, '_dead_letter_queue': 'dlq',
        '_dead_letter_queue_messages_ttl': 3600})
    client.post('work', {'ttl': 900, 'body': 'poison'})
    claimed = client.claim('work', ttl=60)
    claim_href = claimed[0]['href'].split('claim_id=')[1]
    assert client.call('DELETE', '/queues/work/claims/' +
                       claim_href).status_code == 204
    assert client.claim('work') == []
    assert client.bodies('dlq') == ['poison']


def test_queue_delete_and_stats_on_empty_queue(client):
    client.call('PUT', '/queues/gone', json={})
    client.post('gone', {'ttl': 900, 'body': 1})
    assert client.call('DELETE', '/queues/gone').status_code == 204
    assert client.stats('gone')['total'] == 0


def test_subscriptions_over_rest(client):
    client.call('PUT', '/queues/notify', json={})
    reply = client.call('POST', '/queues/notify/subscriptions', json={
        'subscriber': 'http://127.0.0.1:9/hook', 'ttl': 3600,
        'options': {'k': 'v'}})
    assert reply.status_code == 201, reply.text
    sub_id = reply.json()['subscription_id']
    listed = client.call('GET', '/queues/notify/subscriptions').json()
    assert [s['id'] for s in listed['subscriptions']] == [sub_id]
    assert client.call('DELETE', '/queues/notify/subscriptions/' +
                       sub_id).status_code == 204


def test_tenants_do_not_see_each_other(zaqar_url, client):
    from tests.integration.conftest import Client
    other = Client(zaqar_url, 'another-project')
    client.call('PUT', '/queues/shared-name', json={})
    other.call('PUT', '/queues/shared-name', json={})
    client.post('shared-name', {'ttl': 900, 'body': 'mine'})
    assert other.bodies('shared-name') == []
    assert other.claim('shared-name') == []


def test_encrypted_queue_keeps_delay_and_dead_letters(client):
    # Zaqar's transport encrypts bodies before our driver sees them and
    # decrypts what it reads back; delay and dead letters never read them.
    encrypted = {'_enable_encrypt_messages': True}
    client.call('PUT', '/queues/secret-dlq', json=encrypted)
    assert client.call('PUT', '/queues/secret', json=dict(
        encrypted, _default_message_delay=600, _max_claim_count=1,
        _dead_letter_queue='secret-dlq')).status_code == 201
    reply = client.post('secret', {'ttl': 900, 'body': {'n': 'now'},
                                   'delay': 0},
                        {'ttl': 900, 'body': 'later'})
    assert reply.status_code == 201, reply.text
    listed = client.call('GET', '/queues/secret/messages',
                         params={'echo': 'true'}).json()['messages']
    assert [m['body'] for m in listed] == [{'n': 'now'}]
    assert client.bodies('secret', include_delayed='true') == [
        {'n': 'now'}, 'later']
    claimed = client.claim('secret', ttl=60)
    # Zaqar 23's claims endpoint returns bodies as stored (encrypted), on
    # its own drivers too; the due message is the one handed out.
    assert [m['id'] for m in claimed] == [listed[0]['id']]
    claim_id = claimed[0]['href'].split('claim_id=')[1]
    client.call('DELETE', '/queues/secret/claims/' + claim_id)
    assert client.claim('secret') == []
    assert client.bodies('secret-dlq') == [{'n': 'now'}]


def test_group_key_on_an_encrypted_queue_is_400_at_put(client):
    # A group id cannot be read from an encrypted body: refused when set.
    reply = client.call('PUT', '/queues/sealed', json={
        '_enable_encrypt_messages': True, '_message_group_key': 'cart'})
    assert reply.status_code == 400, reply.text
    description = reply.json()['description']
    assert '_message_group_key' in description
    assert '_enable_encrypt_messages' in description
    assert client.call('GET', '/queues/sealed').json().get(
        '_message_group_key') is None


@pytest.mark.parametrize('dlq', ['itself', 'no spaces', 'x' * 65])
def test_bad_dead_letter_queue_is_400_on_put_and_patch(client, dlq):
    dlq = 'self-dlq' if dlq == 'itself' else dlq
    reply = client.call('PUT', '/queues/self-dlq',
                        json={'_dead_letter_queue': dlq})
    assert reply.status_code == 400, reply.text
    assert '_dead_letter_queue' in reply.json()['description']
    # Nothing stored (v2 answers GET of an unknown queue with defaults).
    assert client.call('GET', '/queues/self-dlq').json().get(
        '_dead_letter_queue') is None
    assert client.call('PUT', '/queues/self-dlq',
                       json={'_max_claim_count': 2}).status_code == 201
    reply = requests.patch(
        client.base + '/queues/self-dlq', timeout=30,
        headers=dict(client.headers, **{
            'Content-Type':
                'application/openstack-messaging-v2.0-json-patch'}),
        data=json.dumps([{'op': 'add', 'path': '/metadata/_dead_letter_queue',
                          'value': dlq}]))
    assert reply.status_code == 400, reply.text
    assert '_dead_letter_queue' in reply.json()['description']
    metadata = client.call('GET', '/queues/self-dlq').json()
    assert metadata.get('_dead_letter_queue') is None
    assert metadata['_max_claim_count'] == 2


def test_a_message_delete_naming_no_claim_is_400_and_deletes_nothing(
        client):
    # api-ref, claims.inc: an ill-formed claim_id names no claim; Zaqar's
    # message delete answers its ClaimDoesNotExist with 400.
    client.call('PUT', '/queues/ill', json={})
    href = client.post('ill', {'ttl': 300, 'body': 1}).json()['resources'][0]
    reply = client.call('DELETE', href.replace('/v2', '', 1),
                        params={'claim_id': "'; DROP TABLE queues"})
    assert reply.status_code == 400, reply.text
    assert client.stats('ill')['total'] == 1
    # docs/compatibility.md: nor does the claims resource find it: read
    # and renewal 404, delete 204 (as for a claim already released).
    claim = '/queues/ill/claims/' + "'; DROP TABLE queues"
    assert client.call('GET', claim).status_code == 404
    assert client.call('PATCH', claim,
                       json={'ttl': 100}).status_code == 404
    assert client.call('DELETE', claim).status_code == 204
    assert client.stats('ill')['total'] == 1


def test_a_renewal_with_a_grace_above_the_bound_is_400(client):
    # docs/compatibility.md: Zaqar checks a renewal's ttl only; ours
    # bounds its grace by max_claim_grace (43200) too, as at creation,
    # and the claim stays as it was.
    client.call('PUT', '/queues/pg', json={})
    client.post('pg', {'ttl': 60, 'body': 1})
    href = client.claim('pg', ttl=100, grace=60)[0]['href']
    claim_id = href.split('claim_id=')[1]
    reply = client.call('PATCH', '/queues/pg/claims/' + claim_id,
                        json={'ttl': 100, 'grace': 43201})
    assert reply.status_code == 400, reply.text
    assert 'grace' in reply.text and '43200' in reply.text
    claimed = client.call('GET', '/queues/pg/claims/' + claim_id).json()
    # Zaqar reports no grace; the message's ttl, grown to the claim's
    # ttl + grace, shows it.
    assert claimed['ttl'] == 100, claimed
    assert [m['ttl'] for m in claimed['messages']] == [160], claimed
    reply = client.call('PATCH', '/queues/pg/claims/' + claim_id,
                        json={'ttl': 200, 'grace': 43200})
    assert reply.status_code == 204, reply.text
    claimed = client.call('GET', '/queues/pg/claims/' + claim_id).json()
    assert claimed['ttl'] == 200


@pytest.mark.parametrize('body', ['\ud800', {'text': 'a\udfffb'},
                                  {'g': '\ud800'}])
def test_a_body_with_a_lone_surrogate_is_400_and_stores_nothing(client,
                                                                body):
    # JSON's "\ud800" escape is valid JSON text but decodes to a lone
    # surrogate, which no store can hold as UTF-8: a clear 400 naming the
    # message (it was a 503 with a stack trace), in a body or a group id.
    client.call('PUT', '/queues/sur', json={'_message_group_key': 'g'})
    reply = client.post('sur', {'ttl': 300, 'body': 'fine'},
                        {'ttl': 300, 'body': body})
    assert reply.status_code == 400, reply.text
    assert 'surrogate' in reply.text
    assert client.stats('sur')['total'] == 0
