"""The test factory's faster unique-index check on mongomock
(localstack/factories/mongodb.py) refuses exactly what mongomock's own
check refuses: a duplicate of a whole unique index, of a partial one on
``{field: {$exists: true}}`` (only documents with the field count), and,
through mongomock's check, of any other partial index."""

import mongomock
import pytest

from localstack.factories import mongodb as mongodb_factory


@pytest.fixture
def messages():
    mongodb_factory.adapt_mongomock()
    found = mongomock.MongoClient().db.messages
    found.create_index([('q', 1), ('k', 1)], unique=True, name='position')
    found.create_index([('q', 1), ('h', 1)], unique=True, name='head',
                       partialFilterExpression={'h': {'$exists': True}})
    found.create_index([('q', 1), ('c', 1)], unique=True, name='claimed',
                       partialFilterExpression={'s': 'c'})
    return found


def test_a_duplicate_of_a_whole_unique_index_is_refused(messages):
    messages.insert_one({'_id': 1, 'q': 'a', 'k': 1})
    messages.insert_one({'_id': 2, 'q': 'b', 'k': 1})
    with pytest.raises(mongomock.DuplicateKeyError):
        messages.insert_one({'_id': 3, 'q': 'a', 'k': 1})
    with pytest.raises(mongomock.DuplicateKeyError):
        messages.update_one({'_id': 2}, {'$set': {'q': 'a'}})
    assert sorted(d['_id'] for d in messages.find()) == [1, 2]
    assert messages.find_one({'_id': 2})['q'] == 'b'


def test_a_partial_index_counts_only_documents_with_its_field(messages):
    messages.insert_one({'_id': 1, 'q': 'a', 'k': 1, 'h': 'g'})
    # Without ``h`` (not in the index) and with another ``h``: no clash.
    messages.insert_one({'_id': 2, 'q': 'a', 'k': 2})
    messages.insert_one({'_id': 3, 'q': 'a', 'k': 3, 'h': 'other'})
    with pytest.raises(mongomock.DuplicateKeyError):
        messages.insert_one({'_id': 4, 'q': 'a', 'k': 4, 'h': 'g'})
    with pytest.raises(mongomock.DuplicateKeyError):
        messages.update_one({'_id': 2}, {'$set': {'h': 'g'}})


def test_other_partial_indexes_are_left_to_mongomock(messages):
    messages.insert_one({'_id': 1, 'q': 'a', 'k': 1, 's': 'c', 'c': 'x'})
    messages.insert_one({'_id': 2, 'q': 'a', 'k': 2, 's': 'r', 'c': 'x'})
    with pytest.raises(mongomock.DuplicateKeyError):
        messages.insert_one({'_id': 3, 'q': 'a', 'k': 3, 's': 'c',
                             'c': 'x'})
