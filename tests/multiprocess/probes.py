"""What each store physically holds, for the checks that the storage API
cannot make."""

from urllib import parse

import redis as redis_py


def stored_ids(backend, driver, queue, project, redis_url):
    """Ids of every message the store still holds for the queue, whatever
    reads show."""
    if backend == 'redis':
        return {m.decode() for m in _redis_zset(queue, project, redis_url,
                                                'msgs')}
    if backend == 'swift':
        qs = driver.queue_state(queue, project)
        return {parse.unquote(e['name'][2:])
                for e in driver.store.listing_all(qs.c, 'm/')}
    from zaqar_delay.drivers.mongodb import fields
    return {doc['_id'] for doc in driver.messages.raw.find(
        fields.queue_filter(queue, project), {'_id': True})}


def check_removal_records(backend, driver, queue, project, removed,
                          redis_url):
    """Each message retention ``removed`` is recorded as the store records
    removals: on Redis remembered like a deleted id, on Swift with one
    tally each (never two)."""
    if backend == 'redis':
        buried = {m.decode() for m in _redis_zset(queue, project, redis_url,
                                                  'deleted')}
        assert removed <= buried
    elif backend == 'swift':
        qs = driver.queue_state(queue, project)
        tallies = [e['name'].rsplit('/', 1)[1]
                   for e in driver.store.listing_all(qs.c, 'n/')]
        assert len(tallies) == len(set(tallies)), 'a removal counted twice'
        assert set(tallies) == removed


def check_posted_count(backend, driver, queue, project, count):
    """Where the store keeps a queue's post counter (MongoDB), every
    message posted took its own number."""
    if backend == 'mongodb':
        from zaqar_delay.drivers.mongodb import fields
        counter = driver.counters.raw.find_one(
            fields.queue_filter(queue, project))
        assert counter['n'] == count


def length_floor(driver, queue, project):
    """MongoDB's length floor of the queue: the lowest position retention
    still keeps (0 before the first overflow)."""
    from zaqar_delay.drivers.mongodb import fields
    counter = driver.counters.find_one(
        fields.queue_filter(queue, project), {fields.LENGTH_FLOOR: 1})
    return (counter or {}).get(fields.LENGTH_FLOOR, 0)


def _redis_zset(queue, project, redis_url, suffix):
    from zaqar_delay.drivers.redis import keys
    key = dict(zip(keys.QUEUE_KEY_SUFFIXES,
                   keys.queue_keys(queue, project)))[suffix]
    return redis_py.Redis.from_url(redis_url).zrange(key, 0, -1)
