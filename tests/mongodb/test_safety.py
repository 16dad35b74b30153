"""Bodies, names and ids are data: they cannot bend a MongoDB query."""

import bson
import pytest
from zaqar.storage import errors as storage_errors

from tests.contract.helpers import CLIENT, claim, listed, post
from zaqar_delay import errors
from zaqar_delay.drivers.mongodb import fields

GROUP = 'drivers:message_store:delay.mongodb'

NASTY_BODIES = [
    {'$gt': ''},
    {'$where': 'function() { return true; }'},
    {'a.b': 1, 'c': {'d.e': {'$ne': None}}},
    {'$set': {'s': 'c'}},
    {'p': 'other-project', 'q': 'other', 's': 'c', 'e': 0, '_id': 'x'},
    {'\u2603.\u00e9$': ['\u0000', '\U0001f600']},
    ['$in', {'$or': []}],
    '$ne',
]


def test_operator_and_dotted_keys_round_trip_and_match_nothing(driver,
                                                              project):
    driver.queue_controller.create('q', project=project)
    driver.queue_controller.create('q', project=project + '-other')
    post(driver, 'q', project + '-other', 'bystander')
    ids = post(driver, 'q', project, *NASTY_BODIES)
    got = driver.message_controller.bulk_get('q', ids, project=project)
    assert [m['body'] for m in got] == NASTY_BODIES
    assert [m['body'] for m in listed(driver, 'q', project)] == NASTY_BODIES
    for doc in driver.messages.raw.find(fields.queue_filter('q', project)):
        # Stored as text; the document's own fields are untouched.
        assert isinstance(doc['b'], str)
        assert doc['p'] == project and doc['s'] == 'r'
    _, claimed = claim(driver, 'q', project, limit=20)
    assert [m['body'] for m in claimed] == NASTY_BODIES
    assert [m['body'] for m in listed(driver, 'q', project + '-other')] == [
        'bystander']


@pytest.mark.parametrize('bad_id', [{'$ne': ''}, {'$gt': ''}, ['x'], None])
def test_ids_that_are_not_strings_match_nothing(driver, project, bad_id):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'keep')
    assert list(driver.message_controller.bulk_get(
        'q', [bad_id], project=project)) == []
    with pytest.raises(storage_errors.MessageDoesNotExist):
        driver.message_controller.get('q', bad_id, project=project)
    driver.message_controller.delete('q', bad_id, project=project)
    driver.message_controller.bulk_delete('q', [bad_id], project=project)
    with pytest.raises(storage_errors.ClaimDoesNotExist):
        driver.claim_controller.get('q', bad_id, project=project)
    assert [m['body'] for m in listed(driver, 'q', project)] == ['keep']


@pytest.mark.parametrize('name', ['$ne', 'a.b', '$where', '{"$gt": ""}',
                                  '\u2603', ''])
def test_projects_with_operator_like_names_are_isolated(driver, name):
    other = name + '-victim'
    for project in (name, other):
        driver.queue_controller.create('q', project=project)
    post(driver, 'q', other, 'secret')
    post(driver, 'q', name, 'mine')
    assert [m['body'] for m in listed(driver, 'q', name)] == ['mine']
    _, got = claim(driver, 'q', name)
    assert [m['body'] for m in got] == ['mine']
    assert driver.message_controller.stats('q', name)['messages']['total'] == 1
    driver.message_controller._purge_queue('q', name)
    assert [m['body'] for m in listed(driver, 'q', other)] == ['secret']


def test_oversized_body_is_refused_and_nothing_is_stored(request, conf):
    from localstack.factories import mongodb as mongodb_factory
    conf.set_override('max_body_size', 2048, group=GROUP)
    driver = mongodb_factory.make_driver(request, conf)
    driver.queue_controller.create('q', project='big')
    with pytest.raises(errors.InvalidInput) as raised:
        post(driver, 'q', 'big', 'small', 'x' * 3000)
    text = str(raised.value)
    assert '2048' in text and 'max_body_size' in text and 'message 1' in text
    assert driver.messages.raw.count_documents({}) == 0
    assert driver.counters.raw.count_documents({}) == 0
    # Multi-byte characters are counted in bytes.
    with pytest.raises(errors.InvalidInput):
        post(driver, 'q', 'big', '\u2603' * 700)
    post(driver, 'q', 'big', 'y' * 2000)
    assert driver.messages.raw.count_documents({}) == 1
    driver.close()


def test_same_queue_name_in_two_projects_is_two_queues(driver, project):
    other = project + '-b'
    for p in (project, other):
        driver.queue_controller.create('q', project=p)
    a = post(driver, 'q', project, 'a1', 'a2')
    b = post(driver, 'q', other, 'b1')
    claim_id, got = claim(driver, 'q', project)
    assert [m['body'] for m in got] == ['a1', 'a2']
    assert driver.claim_controller.get('q', claim_id, project=project)
    with pytest.raises(storage_errors.ClaimDoesNotExist):
        driver.claim_controller.get('q', claim_id, project=other)
    with pytest.raises(storage_errors.MessageDoesNotExist):
        driver.message_controller.get('q', a[0], project=other)
    driver.message_controller.bulk_delete('q', a + b, project=other)
    assert driver.message_controller.stats(
        'q', project)['messages']['total'] == 2
    assert driver.message_controller.stats(
        'q', other)['messages']['total'] == 0
    # Positions are per queue: each project's queue starts at 1.
    assert [m.position for m in got] == [1, 2]
    listed_b = driver.message_controller.list('q', project=other,
                                              client_uuid=CLIENT, echo=True)
    assert list(next(listed_b)) == []


def encoded_finds(driver, monkeypatch):
    """Every filter sent to ``messages.find``, each encoded as pymongo
    does before it goes to a real server (mongomock takes any Python int;
    pymongo raises OverflowError past int64, which no fault translation
    catches: a 503 with a traceback)."""
    real_find = driver.messages.find
    sent = []

    def find(query, *args, **kwargs):
        bson.encode(query)
        sent.append(query)
        return real_find(query, *args, **kwargs)

    monkeypatch.setattr(driver.messages, 'find', find)
    return sent


@pytest.mark.parametrize('marker', [2 ** 63, 10 ** 30])
def test_a_marker_past_int64_lists_an_empty_page(driver, project,
                                                 monkeypatch, marker):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a')
    encoded_finds(driver, monkeypatch)
    pages = driver.message_controller.list('q', project=project,
                                           marker=str(marker))
    assert list(next(pages)) == []
    assert next(pages) == str(marker)


def test_the_largest_int64_marker_is_a_position_sent_as_one(
        driver, project, monkeypatch):
    driver.queue_controller.create('q', project=project)
    post(driver, 'q', project, 'a')
    sent = encoded_finds(driver, monkeypatch)
    marker = str(2 ** 63 - 1)
    pages = driver.message_controller.list('q', project=project,
                                           marker=marker)
    assert list(next(pages)) == []
    assert next(pages) == marker
    assert any(query.get(fields.POSITION) == {'$gt': 2 ** 63 - 1}
               for query in sent)
