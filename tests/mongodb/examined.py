"""What a MongoDB read examines, counted where no ``explain()`` is to be
had (mongomock).

For every hinted ``find`` on ``messages``, :class:`Examined` counts the
documents a real server's IXSCAN + FETCH would fetch: those whose keys
fall inside the bounds the filter sets on the hinted index's fields,
walked in the query's order until ``skip + limit`` of them match the whole
filter (the other conditions are checked only after the FETCH).
"""

from zaqar_delay.drivers.mongodb import connection
from zaqar_delay.drivers.mongodb import fields
from zaqar_delay.drivers.mongodb import queries


class _Reversed:
    def __init__(self, item):
        self.item = item

    def __lt__(self, other):
        return other.item < self.item

    def __eq__(self, other):
        return self.item == other.item


def _sort_key(sort):
    def key(doc):
        out = []
        for field, direction in sort:
            value = doc.get(field)
            item = (value is not None, value if value is not None else 0)
            out.append(item if direction > 0 else _Reversed(item))
        return out
    return key


class Examined:
    """The documents each hinted find on ``messages`` examines, in
    ``finds`` as (filter, index, examined); and each ``findAndModify``
    with a sort (MongoDB takes no hint there: the planner's choice is
    queries.READY_INDEX, tests/mongodb/test_indexes.py)."""

    def __init__(self, monkeypatch):
        self.finds = []
        original = connection.GuardedCollection.find
        spy = self

        def find(coll, query, projection=None, sort=None, limit=0,
                 hint=None, skip=0):
            raw = coll.raw
            if raw.name == fields.MESSAGES and hint:
                spy.finds.append((query, hint, spy._examined(
                    raw, query, sort, limit, hint, skip)))
            return original(coll, query, projection, sort, limit, hint,
                            skip)

        def find_one_and_update(coll, query, update, sort=None, **kwargs):
            raw = coll.raw
            if raw.name == fields.MESSAGES and sort and '_id' not in query:
                spy.finds.append((query, queries.READY_INDEX, spy._examined(
                    raw, query, sort, 1, queries.READY_INDEX, 0)))
            return coll._translate(raw.find_one_and_update, query, update,
                                   sort=sort, **kwargs)

        monkeypatch.setattr(connection.GuardedCollection, 'find', find)
        monkeypatch.setattr(connection.GuardedCollection,
                            'find_one_and_update', find_one_and_update,
                            raising=False)

    @staticmethod
    def _examined(raw, query, sort, limit, hint, skip):
        keys = ['_id'] if hint == '_id_' else [
            key for key, _ in fields.INDEXES[fields.MESSAGES][hint][0]]
        inside = list(raw.find({k: v for k, v in query.items()
                                if k in keys}))
        if sort:
            inside.sort(key=_sort_key(sort))
        matching = {doc['_id'] for doc in raw.find(query)}
        wanted = skip + limit if limit else None
        examined = matched = 0
        for doc in inside:
            examined += 1
            if doc['_id'] in matching:
                matched += 1
                if wanted is not None and matched >= wanted:
                    break
        return examined

    def reset(self):
        self.finds = []

    @property
    def total(self):
        return sum(n for _, _, n in self.finds)

    @property
    def largest(self):
        return max((n for _, _, n in self.finds), default=0)
