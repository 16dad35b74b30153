"""What a Redis history run left in the store, for a report that failed.

A queue the drain could not empty, or a lost message, is diagnosed from
its keys: which index still holds the id (``avail``, ``delayed``,
``claimed``, ``outbox``...), its message hash, its group's state. The dump
is taken on a direct connection after the drain, before the test's
redis-server is stopped.
"""

import json

import redis


def _value(client, key):
    kind = client.type(key).decode()
    if kind == 'zset':
        return kind, [[m.decode(), s] for m, s in
                      client.zrange(key, 0, -1, withscores=True)]
    if kind == 'hash':
        return kind, {k.decode(): v.decode(errors='replace')
                      for k, v in client.hgetall(key).items()}
    if kind == 'set':
        return kind, sorted(m.decode() for m in client.smembers(key))
    if kind == 'list':
        return kind, [m.decode() for m in client.lrange(key, 0, -1)]
    if kind == 'string':
        return kind, client.get(key).decode(errors='replace')
    return kind, None


def _glob_escape(text):
    for char in '\\*?[]':
        text = text.replace(char, '\\' + char)
    return text


def dump_queues(port, project, queues, path):
    """Write every key of ``queues`` (names) of ``project`` on the Redis at
    ``port`` to ``path`` as JSON: {key: [type, value]}."""
    from zaqar_delay.drivers.redis import keys
    client = redis.Redis(port=port)
    found = {}
    try:
        for queue in queues:
            pattern = _glob_escape(keys.queue_prefix(queue, project)) + ':*'
            for key in client.scan_iter(match=pattern, count=1000):
                found[key.decode()] = _value(client, key)
        found['TIME'] = [int(x) for x in client.time()]
    finally:
        client.close()
    with open(path, 'w') as f:
        json.dump(found, f, indent=1, sort_keys=True)
    return path
