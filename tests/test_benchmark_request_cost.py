"""``python -m benchmarks.request_cost`` at a tiny size: every row is
printed with a figure for both drivers, and the Swift request tally
counts what the drivers send (no CPU figure is asserted but that it was
measured: these machines are shared)."""

import re

import pytest

from benchmarks import request_cost

pytestmark = [pytest.mark.integration]

MS = r'([\d,.]+) ms'


def figures(out, row):
    found = re.search(r'^%s +%s +%s +[\d.]+x$' % (re.escape(row), MS, MS),
                      out, re.M)
    assert found, out
    return [float(found.group(i).replace(',', '')) for i in (1, 2)]


def counts(out, phase, kind):
    table = out.split(phase + ', requests')[1].split('\n\n')[0]
    found = re.search(r'^%s +([\d.]+) +([\d.]+)$' % re.escape(kind), table,
                      re.M)
    assert found, table
    return [float(found.group(i)) for i in (1, 2)]


def test_a_bulk_delete_counts_the_objects_it_names():
    assert request_cost.kind_of('post_account', {
        'query_string': 'bulk-delete', 'data': b'/c/a\n/c/b\n/c/d'}) == (
            'bulk-deleted object', 3)
    assert request_cost.kind_of('put_object', {}) == ('PUT', 1)
    assert request_cost.kind_of('head_container', {}) == ('other', 1)


def test_redis_prints_the_server_cpu_of_both_drivers(capsys, redis_url):
    request_cost.redis_costs(redis_url, calls=3, rounds=1)
    out = capsys.readouterr().out
    for row in ('post of 10', 'claim of 10 + its deletes'):
        assert all(figure > 0 for figure in figures(out, row)), out


def test_swift_prices_each_request_and_tallies_each_call(capsys, redis_url,
                                                        swift_server):
    request_cost.swift_costs(swift_server, redis_url, calls=2, repeat=20)
    out = capsys.readouterr().out
    for kind in request_cost.KINDS[:-1]:
        assert re.search(r'^%s +[\d.]+ ms' % re.escape(kind), out,
                         re.M), out
    # The README's 42 requests for a post of 10 against Zaqar's 10 PUTs:
    # ours writes a position, the message and its filing per message,
    # reads each position back and lists twice (the last position, the
    # highest consumer fence); Zaqar's one object each.
    assert counts(out, 'post of 10', 'PUT') == [30, 10], out
    assert counts(out, 'post of 10', 'HEAD') == [10, 0], out
    assert counts(out, 'post of 10', 'listing') == [2, 0], out
    # The README's account of a claim of 10 with its deletes: ours lists
    # 3 times for the claim and once per delete (its queue's consumers;
    # the claimer's lock is asked for by name, and no later one while the
    # claim lives: 2 HEADs per message with the claim's read-back), and
    # deletes four objects per message (its filing at the claim; its
    # position, body and lock at the delete); Zaqar's lists once and
    # DELETEs each message. Ours
    # GETs each message once, at the claim: a claimer's delete finds the
    # claim's expiry in its lock, not in the claim's record.
    claimed = 'claim of 10 + its deletes'
    assert counts(out, claimed, 'listing') == [13, 1], out
    assert counts(out, claimed, 'HEAD') == [20, 10], out
    assert counts(out, claimed, 'GET') == [10, 20], out
    assert counts(out, claimed, 'bulk-deleted object')[0] == 40, out
    assert counts(out, claimed, 'DELETE') == [0, 10], out
    for phase in ('post of 10', 'claim of 10 + its deletes'):
        for row in ('priced', 'measured'):
            name = '%s, Swift CPU' % phase
            table = out.split(name)[1]
            assert all(f > 0 for f in figures(table, row)), out
