"""The version of the MongoDB layout, kept in the ``layout`` collection as
one document, ``{_id: "layout", v: N}``.

Read when the driver first uses the database and again by every gc pass.
A database without the document gets the current version when it holds
no queue, else version 1: its queues were written before versions
existed, and a later release must not take them for its own layout. A
newer version is refused (this code would misread it); an older one
until ``zaqar-delay-migrate --upgrade-layout`` has brought the database
up to date and written the version this code reads.

Versions:

1. one document per message in ``messages``, one counter per queue.
"""

from zaqar_delay import layout as shared
from zaqar_delay.drivers.mongodb import fields

CURRENT = 1
WHERE = 'collection {}, document {}'.format(fields.LAYOUT, fields.LAYOUT_ID)


def version(database):
    """The database's layout version, recording one if it has none (an
    upsert that only inserts: racing drivers agree on the first)."""
    layouts = database[fields.LAYOUT]
    found = layouts.find_one({'_id': fields.LAYOUT_ID})
    if found is not None:
        return found['v']
    holds_queues = any(
        database[name].find_one({}, {'_id': True}) is not None
        for name in (fields.COUNTERS, fields.MESSAGES))
    layouts.update_one({'_id': fields.LAYOUT_ID}, {'$setOnInsert': {
        'v': shared.UNVERSIONED if holds_queues else CURRENT}}, upsert=True)
    return layouts.find_one({'_id': fields.LAYOUT_ID})['v']


def check(database):
    """Raise LayoutMismatch unless the database is at CURRENT."""
    shared.check('MongoDB', version(database), CURRENT, WHERE)


def write(database, number):
    database[fields.LAYOUT].update_one(
        {'_id': fields.LAYOUT_ID}, {'$set': {'v': number}}, upsert=True)


def upgrade(database, say):
    """Nothing to convert while layout 1 is the only one: record the
    version this code reads in a database of an earlier one."""
    found = version(database)
    shared.refuse_later('MongoDB', found, CURRENT, WHERE)
    if found < CURRENT:
        write(database, CURRENT)
        say('MongoDB layout upgraded from version {} to {}'.format(
            found, CURRENT))
    else:
        say('MongoDB layout is version {}: nothing to upgrade'.format(
            found))
