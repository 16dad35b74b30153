"""Indexes exist, and the hot queries are shaped to use them.

On mongomock the shape is checked statically (equality fields form a
prefix of the index, then the range or sort field); on a real server
(``ZAQAR_DELAY_TEST_MONGODB_URI``) ``explain()`` must also show the index
and that no delayed, claimed or expired message is examined.
"""

import pytest

from tests.contract.helpers import claim, post
from zaqar_delay.drivers.mongodb import fields
from zaqar_delay.drivers.mongodb import queries

NOW = 1_700_000_000_000


def index_keys(query):
    if query.index == '_id_':
        return ['_id']
    indexes = fields.INDEXES[query.collection]
    return [key for key, _ in indexes[query.index][0]]


def equality_fields(query_filter):
    return [k for k, v in query_filter.items()
            if not (isinstance(v, dict) and any(o.startswith('$')
                                                for o in v))]


def assert_uses_prefix(query):
    keys = index_keys(query)
    filt = query.filter
    eq = [k for k in equality_fields(filt) if k in keys]
    # Equality fields of the index come first, in index order.
    assert keys[:len(eq)] == sorted(eq, key=keys.index), (query, keys)
    assert keys[:len(eq)] == eq or set(keys[:len(eq)]) == set(eq)
    # The next key is the sort or range field (or an $in on state,
    # merged by position).
    rest = keys[len(eq):]
    if query.sort:
        sort_field = query.sort[0][0]
        assert sort_field in rest, (query, keys)
    ranged = [k for k in filt if k not in eq and k in keys]
    for field in ranged:
        assert field in rest, (query, keys)


EXAMPLES = [
    queries.ready('q', 'p', NOW),
    queries.page('q', 'p', NOW, None, ['r']),
    queries.page('q', 'p', NOW, None, ['r', 'b']),
    queries.page('q', 'p', NOW, 5, ['r', 'b', 'c']),
    queries.page('q', 'p', NOW, 5, ['r', 'b', 'c', 'd'], 'client'),
    queries.page('q', 'p', NOW, 5, ['r', 'c']),
    queries.page('q', 'p', NOW, 5, ['r', 'c', 'd'], 'client'),
    queries.due_now('q', 'p', NOW, -1),
    queries.any_live('q', 'p', NOW, 1),
    queries.delayed_due('q', 'p', NOW),
    queries.due_again('q', 'p', NOW),
    queries.claimed_due('q', 'p', NOW),
    queries.expired('q', 'p', NOW),
    queries.live('q', 'p', NOW),
    queries.in_state('q', 'p', 'c'),
    queries.heads('q', 'p'),
    queries.grouped('q', 'p', 'c'),
    queries.group_head('q', 'p', '"a"'),
    queries.group_first('q', 'p', '"a"', NOW),
    queries.group_members('q', 'p', '"a"'),
    queries.next_group('q', 'p', None),
    queries.next_group('q', 'p', '"a"'),
    queries.stale_moves('q', 'p', NOW),
    queries.moves_started('q', 'p', NOW),
    queries.of_move('q', 'p', 'move-id'),
    queries.ended_claims('q', 'p', NOW),
    queries.of_claims('q', 'p', ['c1', 'c2']),
    queries.by_ids('q', 'p', ['m1']),
    queries.keepable('q', 'p', NOW),
    queries.keepable('q', 'p', NOW, NOW - 1000),
    queries.keepable_positions('q', 'p'),
    queries.keepable_positions('q', 'p', 7, -1),
    queries.too_old('q', 'p', NOW, NOW - 1000),
    queries.beyond_length('q', 'p', NOW, NOW - 1000, 7),
    queries.given_up('q', 'p', 3, 9),
    queries.given_up('q', 'p', before=9),
    queries.ready('q', 'p', NOW, 'client'),
    queries.waiting_for('q', 'p', 'client', NOW),
    queries.pin_of('q', 'p', ['"a"']),
    queries.pins_of('q', 'p', 'client', NOW),
    queries.pins('q', 'p'),
    queries.pinned_heads('q', 'p', ['"a"'], 'client'),
    queries.sticky_client('q', 'p', 'client'),
    queries.sticky_clients('q', 'p', NOW),
]


@pytest.mark.parametrize('query', EXAMPLES,
                         ids=lambda q: '{}-{}'.format(q.collection, q.index))
def test_every_hot_query_follows_its_index_prefix(query):
    assert_uses_prefix(query)


def test_every_query_builder_is_covered():
    built = {q.index for q in EXAMPLES}
    # TTL indexes serve MongoDB's TTL monitor, no query of ours.
    assert {name for coll in fields.INDEXES.values()
            for name, (_, options) in coll.items()
            if not name.startswith('zd_sub') and name != 'zd_counter_queue'
            and 'expireAfterSeconds' not in options
            } <= built | {'zd_claim'}


def test_claim_query_leaves_out_delayed_claimed_and_expired():
    query = queries.ready('q', 'p', NOW).filter
    assert query['s'] == fields.READY
    assert query['e'] == {'$gt': NOW}
    assert list(query)[:3] == ['p', 'q', 's']


def test_indexes_exist_with_their_options(driver):
    database = driver.database
    for collection, indexes in fields.INDEXES.items():
        info = database[collection].index_information()
        for name, (keys, options) in indexes.items():
            assert name in info, (collection, name)
            assert [tuple(k) for k in info[name]['key']] == [
                tuple(k) for k in keys]
            for option, value in options.items():
                assert info[name].get(option) == value, (name, option)


def test_positions_are_unique_per_queue(driver):
    info = driver.database[fields.MESSAGES].index_information()
    assert info['zd_position']['unique'] is True
    assert info['zd_claim']['partialFilterExpression'] == {'s': 'c'}


def test_one_head_per_group_is_a_unique_partial_index(driver):
    info = driver.database[fields.MESSAGES].index_information()
    head = info['zd_group_head']
    assert [k for k, _ in head['key']] == ['p', 'q', 'h']
    assert head['unique'] is True
    # Only heads are in it: blocked members (no ``h``) never collide.
    assert head['partialFilterExpression'] == {'h': {'$exists': True}}


def test_group_queries_probe_one_group_by_value():
    head = queries.group_head('q', 'p', '{"$gt": ""}')
    assert head.filter == {'p': 'p', 'q': 'q', 'h': {
        '$eq': '{"$gt": ""}', '$exists': True}}
    first = queries.group_first('q', 'p', '"a"', NOW)
    assert first.filter == {'p': 'p', 'q': 'q', 'g': '"a"',
                            'e': {'$gt': NOW}}
    assert first.sort == [('k', 1)] and first.index == 'zd_group'
    # The skip scan starts at the smallest string: encoded ids are never
    # empty, and it never meets ungrouped messages (no ``g``).
    assert queries.next_group('q', 'p', None).filter['g'] == {'$gt': ''}
    assert queries.next_group('q', 'p', '"a"').sort == [('g', 1), ('k', 1)]


def test_claim_range_holds_no_blocked_or_moving_state():
    query = queries.ready('q', 'p', NOW)
    assert query.filter['s'] == fields.READY
    assert fields.READY not in (fields.BLOCKED, fields.MOVING)
    # Listing shows blocked members as unclaimed messages, due ones only.
    page = queries.page('q', 'p', NOW, None, ['r', 'b']).filter
    assert page['s'] == {'$in': ['b', 'r']}
    assert page['$or'] == [{'s': 'r'}, {'d': {'$lte': NOW}}]
    everything = queries.page('q', 'p', NOW, None, ['r', 'b', 'c', 'd'])
    assert everything.filter['s'] == {'$ne': fields.MOVING}


class Spy:
    """Records the finds the driver sends, with their hints."""

    def __init__(self, collection):
        self.collection = collection
        self.finds = []

    def __getattr__(self, name):
        return getattr(self.collection, name)

    def find(self, query, projection=None, sort=None, limit=0, hint=None):
        self.finds.append((query, sort, limit, hint))
        return self.collection.find(query, projection, sort, limit, hint)


def test_claim_never_reads_blocked_members(driver, project):
    """SPEC 4 cost: a claim skips blocked groups without touching them.
    Behind a claimed head, 200 blocked members; the next claim sends the
    ready-range query only, and it comes back empty."""
    driver.queue_controller.create(
        'q', metadata={'_message_group_key': 'g'}, project=project)
    post(driver, 'q', project, *[{'g': 'a', 'n': n} for n in range(200)])
    claim(driver, 'q', project, limit=5)
    spy = Spy(driver.messages)
    driver.claim_controller._messages = spy
    assert claim(driver, 'q', project, limit=5) == (None, [])
    for query, _, _, hint in spy.finds:
        assert 'g' not in query and query.get('s') != fields.BLOCKED
    ready = [(q, hint) for q, _, _, hint in spy.finds
             if q.get('s') == fields.READY]
    assert ready and all(h == 'zd_state_position' for _, h in ready)


def test_claim_and_list_send_hinted_index_shaped_queries(driver, project):
    driver.queue_controller.create(
        'q', metadata={'_default_message_delay': 60}, project=project)
    post(driver, 'q', project, 'later', 'later')
    post(driver, 'q', project, 'now', delay=0)
    spy = Spy(driver.messages)
    driver.message_controller._messages = spy
    driver.claim_controller._messages = spy
    claim(driver, 'q', project, limit=5)
    list(next(driver.message_controller.list('q', project=project)))
    hinted = [(q, hint) for q, _, _, hint in spy.finds if hint]
    assert any(h == 'zd_state_position' and q.get('s') == 'r'
               for q, h in hinted)
    for query, hint in hinted:
        assert query['p'] == project and query['q'] == 'q'


def explain(driver, query, limit=10):
    cursor = driver.messages.raw.find(query.filter)
    if query.sort:
        cursor = cursor.sort(query.sort)
    return cursor.limit(limit).hint(query.index).explain()


def plan_nodes(plan):
    """Every stage of an explained plan, the root first."""
    yield plan
    for child in plan.get('inputStages', []) + [plan.get('inputStage')]:
        if child:
            yield from plan_nodes(child)


def stages(plan):
    return [node.get('stage') for node in plan_nodes(plan)]


def index_names(plan):
    return [node['indexName'] for node in plan_nodes(plan)
            if 'indexName' in node]


def delayed_ready_and_claimed(driver, project):
    """Queue 'q': 300 delayed messages, then 10 ready and 40 claimed."""
    driver.queue_controller.create(
        'q', metadata={'_default_message_delay': 600}, project=project)
    post(driver, 'q', project, *range(300))              # delayed
    post(driver, 'q', project, *range(50), delay=0)      # ready
    claim(driver, 'q', project, limit=40)               # 40 claimed


def test_real_server_claim_examines_only_ready_messages(driver, real_server,
                                                       project):
    delayed_ready_and_claimed(driver, project)
    now = driver.now()
    plan = explain(driver, queries.ready('q', project, now), limit=5)
    winning = plan['queryPlanner']['winningPlan']
    assert 'IXSCAN' in stages(winning) and 'SORT' not in stages(winning)
    stats = plan['executionStats']
    assert stats['nReturned'] == 5
    assert stats['totalDocsExamined'] == 5
    due = queries.delayed_due('q', project, now)
    plan = explain(driver, due)
    assert plan['executionStats']['totalDocsExamined'] == 0


def test_real_server_claim_examines_no_blocked_member(driver, real_server,
                                                     project):
    driver.queue_controller.create(
        'q', metadata={'_message_group_key': 'g'}, project=project)
    post(driver, 'q', project, *[{'g': n % 5, 'n': n} for n in range(300)])
    post(driver, 'q', project, *[{'n': n} for n in range(10)])
    claim(driver, 'q', project, limit=3)         # three heads claimed
    now = driver.now()
    plan = explain(driver, queries.ready('q', project, now), limit=20)
    stats = plan['executionStats']
    # Two unclaimed heads and ten ungrouped messages: exactly those.
    assert stats['nReturned'] == 12
    assert stats['totalDocsExamined'] == 12
    assert stats['totalKeysExamined'] <= 13
    head = explain(driver, queries.group_head('q', project, '0'), limit=1)
    assert 'zd_group_head' in str(head['queryPlanner']['winningPlan'])
    assert head['executionStats']['totalKeysExamined'] <= 1
    nxt = explain(driver, queries.next_group('q', project, '1'), limit=1)
    assert nxt['executionStats']['totalDocsExamined'] == 1
    assert 'SORT' not in stages(nxt['queryPlanner']['winningPlan'])


def test_real_server_sticky_claim_examines_no_head_pinned_to_others(
        driver, real_server, project):
    from zaqar_delay import sticky
    driver.queue_controller.create('q', metadata={
        '_message_group_key': 'g', '_message_group_sticky': 600},
        project=project)
    post(driver, 'q', project,
         *[{'g': n, 'k': k} for k in (1, 2) for n in range(30)])
    with sticky.acting_as('bob'):
        for _ in range(3):           # 30 groups pinned to Bob, heads wait
            claim_id, got = claim(driver, 'q', project, limit=10)
            driver.message_controller.bulk_delete(
                'q', [m['id'] for m in got], project=project,
                claim_ids=[claim_id])
    post(driver, 'q', project, *range(5))
    plan = explain(driver, queries.ready('q', project, driver.now(),
                                         'alice'), limit=20)
    stats = plan['executionStats']
    # The five unpinned messages, none of Bob's thirty heads.
    assert stats['nReturned'] == 5
    assert stats['totalDocsExamined'] == 5
    assert stats['totalKeysExamined'] <= 8


def test_real_server_settle_probe_examines_nothing_when_nothing_is_due(
        driver, real_server, project):
    delayed_ready_and_claimed(driver, project)
    probe = queries.needs_settling('q', project, driver.now())
    plan = driver.messages.raw.find(probe.filter, {'_id': True}).limit(
        1).explain()
    assert 'COLLSCAN' not in stages(plan['queryPlanner']['winningPlan'])
    stats = plan['executionStats']
    assert stats['nReturned'] == 0
    assert stats['totalDocsExamined'] == 0
    # One seek past each empty range: claimed, delayed, expired.
    assert stats['totalKeysExamined'] <= 4


def test_real_server_claim_of_one_picks_the_oldest_by_its_index(
        driver, real_server, project):
    # claims.py: a claim or pop of one is a findAndModify that sorts
    # itself, with no hint (MongoDB 4.2 takes none there): the planner
    # must choose the index that gives the order, and read one message.
    delayed_ready_and_claimed(driver, project)
    ready = queries.ready('q', project, driver.now())
    plan = driver.messages.raw.database.command(
        'explain', {'findAndModify': driver.messages.raw.name,
                    'query': ready.filter, 'sort': dict(ready.sort),
                    'update': {'$set': {'unused': 1}}},
        verbosity='executionStats')
    winning = plan['queryPlanner']['winningPlan']
    assert 'SORT' not in stages(winning)
    assert index_names(winning) == [queries.READY_INDEX]
    assert plan['executionStats']['totalDocsExamined'] == 1
