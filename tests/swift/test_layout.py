"""Swift names and layout: data never becomes syntax, and every object a
message needs is where names.py says."""

import time

import pytest

from tests.contract.helpers import claim, post
from zaqar_delay.drivers.swift import connection
from zaqar_delay.drivers.swift import names


@pytest.mark.parametrize('project,queue', [
    ('a:b', 'c'), ('a', 'b:c'), ('a/b', 'c'), ('', 'q'), (None, 'q'),
    ('#x', 'q'), ('\u2603', 'q'), ('%3A', 'q'), ('x' * 256, 'q' * 64),
])
def test_container_names_are_valid_and_unforgeable(project, queue):
    name = names.container(names.MESSAGES, queue, project)
    assert len(name.encode()) <= 256 and '/' not in name
    assert name.count(':') == 3  # zd : kind : project : queue
    assert name.startswith('zd:m:')


def test_distinct_projects_never_share_a_container():
    pairs = [('a:b', 'c'), ('a', 'b:c'), ('a%3Ab', 'c'), ('', 'q'),
             ('x' * 256, 'q'), ('x' * 255, 'q'), ('#' + 'x' * 64, 'q')]
    containers = {names.container(names.MESSAGES, q, p) for p, q in pairs}
    assert len(containers) == len(pairs)


def test_a_long_project_is_hashed():
    name = names.container(names.MESSAGES, 'q', 'x' * 256)
    assert name.startswith('zd:m:#') and len(name) < 100


def test_uri_forms():
    v1 = connection.Endpoint(
        'delay.swift://test%3Atester:tes%40ting@127.0.0.1:8080/auth/v1.0'
        '?auth=v1', 'keystone')
    assert (v1.auth, v1.user, v1.key, v1.auth_url) == (
        'v1', 'test:tester', 'tes@ting', 'http://127.0.0.1:8080/auth/v1.0')
    tls = connection.Endpoint('delay.swift://a:b@swift.example:443?tls=1',
                              'v1')
    assert tls.auth_url == 'https://swift.example:443/auth/v1.0'
    keystone = connection.Endpoint('delay.swift://zaqar:pw@/service',
                                   'keystone')
    assert (keystone.auth, keystone.user, keystone.key, keystone.project) \
        == ('keystone', 'zaqar', 'pw', 'service')
    with pytest.raises(ValueError):
        connection.Endpoint('redis://x', 'v1')
    with pytest.raises(ValueError):
        connection.Endpoint('delay.swift://a:b@h/?auth=v9', 'v1')


def test_objects_of_a_posted_delayed_and_claimed_message(
        driver, make_queue, project, clock):
    queue = make_queue({'_default_message_delay': 30})
    ready, later = (post(driver, queue, project, 'r', delay=0)[0],
                    post(driver, queue, project, 'l')[0])
    qs = driver.queue_state(queue, project)

    def objects():
        return [e['name'] for e in driver.store.listing_all(qs.c, '')]

    listed = objects()
    assert sum(n.startswith('p/') for n in listed) == 2
    assert {'m/' + ready, 'm/' + later} <= set(listed)
    assert [n for n in listed if n.startswith('a/')][0].endswith(
        '/%s/1' % ready)
    assert [n for n in listed if n.startswith('d/')][0].endswith(
        '/%s/1' % later)
    claim_id, messages = claim(driver, queue, project)
    listed = objects()
    assert [m['id'] for m in messages] == [ready]
    assert 'l/%s/1' % ready in listed and 'c/' + claim_id in listed
    assert [n for n in listed if n.startswith('x/')][0].endswith(claim_id)
    assert not [n for n in listed if n.startswith('a/')]
    meta = driver.store.container_meta(qs.c)
    assert meta == {'project': project, 'queue': queue}


def test_no_object_of_a_message_carries_an_expiry_for_swift(
        driver, make_queue, project):
    """Swift's expiry queue costs each PUT and DELETE of an object with
    X-Delete-At (a third more CPU on the test Swift): neither a message's
    position nor its ``m/`` has one, also when a claim extends its life
    (which its ``e`` then says). They go with the message, or with gc's
    removal of the expired message (test_isolation_gc.py), and an ``m/``
    no position names with gc's stray sweep (test_strays.py)."""
    queue = make_queue()
    message_id = post(driver, queue, project, 'short', ttl=60)[0]
    qs = driver.queue_state(queue, project)
    claim(driver, queue, project, ttl=120, grace=120)
    position = [e['name'] for e in driver.store.listing(qs.c, 'p/')]
    assert len(position) == 1
    assert 'x-delete-at' not in driver.store.head(qs.c, position[0])
    message = driver.store.head(qs.c, names.message_obj(message_id))
    assert 'x-delete-at' not in message
    # The claim made it live past its ttl: 240 s from now, not 60.
    assert int(message['x-object-meta-e']) / 1000 - time.time() > 200


def test_a_claim_does_not_read_delayed_messages(driver, make_queue, project,
                                                monkeypatch):
    # SPEC §3: claiming must not scan delayed messages. 100 wait in d/;
    # the claim's listings stop at d/<now>, and it reads one message.
    queue = make_queue({'_default_message_delay': 600})
    post(driver, queue, project, *range(100))
    post(driver, queue, project, 'ready', delay=0)
    entries, fetched = [], []
    store = driver.store
    listing, call = store.listing, store.call

    def counted_listing(container, prefix, *args, **kwargs):
        found = listing(container, prefix, *args, **kwargs)
        entries.extend(e['name'] for e in found)
        return found

    def counted_call(method, *args, **kwargs):
        if method == 'get_object':
            fetched.append(args[1])
        return call(method, *args, **kwargs)

    monkeypatch.setattr(store, 'listing', counted_listing)
    monkeypatch.setattr(store, 'call', counted_call)
    got = claim(driver, queue, project)[1]
    assert [m['body'] for m in got] == ['ready']
    assert not [name for name in entries if name.startswith('d/')]
    assert len(entries) <= 3, entries
    assert [name for name in fetched if name.startswith('m/')] == [
        names.message_obj(got[0]['id'])]


def test_positions_are_increasing_and_zero_padded(driver, make_queue,
                                                  project):
    queue = make_queue()
    for n in range(3):
        post(driver, queue, project, n, n + 10)
    qs = driver.queue_state(queue, project)
    positions = [e['name'] for e in driver.store.listing(qs.c, 'p/')]
    assert len(positions) == 6
    assert all(len(p) == 2 + names.POS_DIGITS for p in positions)
    values = [int(p[2:]) for p in positions]
    assert values == sorted(set(values))
