"""What zaqar-delay-migrate carried in, remembered until it expires.

A move run again after consumers used this store must not bring back
what they deleted (docs/migration.md). Messages are removed on many paths
(deletes, claims' deletes, pops, retention, gc); rather than leave a
tombstone on each, the move leaves one record per message it carries in
(collection ``carried``, fields.py), which the TTL monitor removes once the
message has expired in the source too.
"""

from pymongo import errors as mongo_errors

from zaqar_delay import errors
from zaqar_delay.drivers.mongodb import clock
from zaqar_delay.drivers.mongodb import connection
from zaqar_delay.drivers.mongodb import fields as f


def before(driver, project, message_ids):
    """Those of ``message_ids`` carried into ``project`` earlier."""
    return {doc['_id'] for doc in driver.carried.find(
        {'_id': {'$in': message_ids}, f.PROJECT: project}, {'_id': True})}


def remember(driver, project, messages, now):
    """Record ``messages`` (rules.NewMessage, stored already) as carried in.

    Written after the messages: a run stopped in between left messages
    without a record, which the next run finds among the messages (and
    records then). A record another run wrote first is the same record.
    """
    records = [{'_id': message.id, f.PROJECT: project,
                f.CARRIED_UNTIL: clock.as_date(now - message.age_ms
                                       + message.ttl * 1000
                                       + f.CARRIED_MARGIN_MS)}
               for message in messages]
    try:
        driver.carried.insert_many(records, ordered=False)
    except mongo_errors.BulkWriteError as refused:
        if not connection.refused_as_duplicates(refused):
            # A storage error, as every other fault (given_up.py does
            # the same): pymongo's own would reach Zaqar as a 500.
            raise errors.BackendUnavailable(backend='MongoDB',
                                            reason=refused)
