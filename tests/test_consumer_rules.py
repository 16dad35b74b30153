"""The shared rules of persistent consumers (zaqar_delay/consumers.py),
without a store: the contract suite checks them through every backend."""

import uuid

import pytest

from zaqar_delay import consumers
from zaqar_delay import errors
from zaqar_delay import retention

NOW = 1_000_000_000


def consumer(cursor=None, handed=None, idle_for=0, lost=0):
    return consumers.Consumer(str(uuid.uuid4()), cursor, handed, lost,
                              NOW - idle_for * 1000)


def test_consume_id_of_takes_a_canonical_uuid_only():
    consume_id = str(uuid.uuid4())
    assert consumers.consume_id_of('cursor:' + consume_id) == consume_id
    assert consumers.consume_id_of('http://127.0.0.1/x') is None
    assert consumers.consume_id_of(None) is None
    for bad in ('cursor:', 'cursor:x', 'cursor:' + consume_id.upper(),
                'cursor:' + uuid.UUID(consume_id).hex):
        with pytest.raises(errors.InvalidInput, match='subscriber'):
            consumers.consume_id_of(bad)


@pytest.mark.parametrize('idle_for, idle', [(9.999, False), (10, True)])
def test_idle_from_exactly_the_idle_time(idle_for, idle):
    assert consumer(idle_for=idle_for).is_idle(NOW, 10) is idle


@pytest.mark.parametrize('live, cut', [(1, None), (2, 5), (3, 5)])
def test_read_through_needs_required_live_consumers(live, cut):
    found = [consumer(cursor=5 + n) for n in range(live)]
    found.append(consumer(cursor=1, idle_for=10))      # idle: not counted
    assert consumers.read_through(2, found, NOW, 10) == cut


def test_read_through_zero_and_none():
    assert consumers.read_through(None, [consumer(cursor=3)], NOW, 10) \
        is None
    assert consumers.read_through(0, [], NOW, 10) == consumers.READ_ALL
    assert consumers.read_through(0, [consumer(idle_for=10)], NOW, 10) \
        == consumers.READ_ALL
    # One live consumer that acknowledged nothing pins everything.
    assert consumers.read_through(0, [consumer(cursor=3), consumer()],
                                  NOW, 10) == -1


@pytest.mark.parametrize('marker, ok', [
    (4, False), (5, True), (8, True), (9, False)])
def test_check_ack_between_cursor_and_handed(marker, ok):
    state = consumer(cursor=5, handed=8)
    if ok:
        state.check_ack(marker)
    else:
        with pytest.raises(consumers.CursorMismatch,
                           match='its cursor is 5 and the last position '
                                 'handed to it is 8'):
            state.check_ack(marker)


def test_check_ack_refuses_everything_before_a_first_page():
    with pytest.raises(consumers.CursorMismatch, match='cursor is none'):
        consumer().check_ack(1)


@pytest.mark.parametrize('start, handed, first, lost', [
    (None, None, 7, 0),     # first page: what went before is not lost
    (3, 3, 4, 0),           # next position
    (3, 3, 7, 3),           # 4, 5, 6 went
    (3, 8, 5, 0),           # handed again after a dropped reply
    (3, 8, 11, 2),          # only what was never handed out: 9, 10
    (None, 8, 11, 2),       # nothing acknowledged, 1..8 handed
])
def test_skipped_counts_only_positions_never_handed_out(start, handed,
                                                        first, lost):
    assert consumer(cursor=start, handed=handed).skipped(start, first) \
        == lost


def test_report():
    state = consumer(cursor=5, handed=8, idle_for=12, lost=2)
    assert state.report(NOW, 10, lag=4) == {
        'cursor': '5', 'lag': 4, 'lost': 2, 'last_active_age': 12,
        'idle': True}


def test_read_by_all_makes_retention_active_unless_disabled():
    assert not retention.Retention().active
    assert retention.Retention(read_through=-1).active
    assert retention.Retention(read_through=4).read_cut == 4
    off = retention.Retention(policy=retention.DISABLED, read_through=4)
    assert (off.active, off.read_cut) == (False, None)
