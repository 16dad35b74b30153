"""``python -m benchmarks.run`` measures at a tiny size on Redis and on
mongomock: both drivers run through every section and the table says so
(no figure is asserted but the round trips, ours and Zaqar's drivers',
which are counts: the README's performance table gives them); on Swift
the pair of drivers it measures works."""

import argparse
import re

import pytest

from benchmarks import round_trips
from benchmarks import run
from benchmarks import workloads

pytestmark = [pytest.mark.integration]

TINY = dict(messages=100, samples=3, delayed=[0, 30], groups=[(0, 0), (6, 2)],
            quick=True, plot=None)
NUMBER = r'[\d,.]+'


def printed(capsys, pair, counted):
    run.bench(*pair, argparse.Namespace(round_trips=counted, **TINY))
    return capsys.readouterr().out


def assert_every_section(out):
    for row in ('post (10/post)', 'claim+delete (10/claim)'):
        assert re.search(r'^%s +%s msg/s +%s msg/s +%sx$' % (
            re.escape(row), NUMBER, NUMBER, NUMBER), out, re.M), out
    for ahead in TINY['delayed']:
        assert re.search(r'^%d delayed ahead .* ms .* ms .*x$' % ahead, out,
                         re.M), out
    for groups, blocked in TINY['groups']:
        assert re.search(r'^%d heads in flight, %d blocked .*x$' % (
            groups, groups * blocked), out, re.M), out


def assert_round_trips(out, expected):
    """Each call's row: ours, then Zaqar's driver's, as the README's
    performance table gives them (counts, not timings)."""
    table = out.split('round trips per call')[1]
    for call, ours, theirs in expected:
        assert re.search(r'^%s +%s +%s$' % (
            re.escape(call), re.escape(ours), re.escape(theirs)), table,
            re.M), table


def test_redis_prints_every_section_and_one_round_trip_per_call(
        capsys, redis_url):
    out = printed(capsys, run.redis_pair(redis_url),
                  round_trips.redis_round_trips)
    assert_every_section(out)
    assert_round_trips(out, [
        ('post (10 messages)', '1 + 0 = 1', '2 + 0 = 2'),
        ('pop (1)', '1 + 0 = 1', '10 + 4 = 14'),
        ('claim (10)', '1 + 0 = 1', '3 + 2 = 5'),
        ('delete', '1 + 0 = 1', '3 + 1 = 4'),
        ('list', '1 + 0 = 1', '30 + 1 = 31'),
        ('get', '1 + 0 = 1', '1 + 1 = 2')])


def test_mongomock_prints_every_section(capsys, redis_url):
    out = printed(capsys, run.mongodb_pair(redis_url, None),
                  round_trips.mongodb_round_trips)
    assert_every_section(out)
    # No more than Zaqar's MongoDB driver but for pop (docs/mongodb.md).
    assert_round_trips(out, [
        ('post (10 messages)', '4 + 0 = 4', '3 + 1 = 4'),
        ('pop (1)', '5 + 0 = 5', '1 + 0 = 1'),
        ('claim (10)', '6 + 0 = 6', '5 + 2 = 7'),
        ('delete', '1 + 0 = 1', '2 + 0 = 2'),
        ('list', '3 + 0 = 3', '3 + 0 = 3'),
        ('get', '1 + 0 = 1', '1 + 0 = 1')])


def test_swift_pair_posts_and_claims_through_both_drivers(redis_url,
                                                         swift_server):
    # bench() itself runs above; a whole Swift run takes 20 s here, so
    # only what --backend swift adds is checked: the pair of drivers.
    for driver in run.swift_pair(redis_url, swift_server):
        project = 'bench-pair'
        queue = workloads.fresh_queue(driver, project)
        driver.message_controller.post(
            queue, [{'ttl': 60, 'body': 'b'}], workloads.CLIENT,
            project=project)
        claimed = list(driver.claim_controller.create(
            queue, workloads.CLAIM, project=project, limit=1)[1])
        assert [m['body'] for m in claimed] == ['b'], type(driver)


def test_swift_prints_the_store_cpu_of_each_call(capsys, redis_url,
                                                 swift_server):
    # The figure behind the Swift ratios: the test Swift's own CPU per
    # call, read from its server processes (more than nothing for both).
    run.print_server_cpu(*run.swift_pair(redis_url, swift_server),
                         'bench-cpu', swift_server.cpu_seconds, calls=2)
    out = capsys.readouterr().out
    for row in ('post of 10', 'claim of 10 + its deletes',
                '  of which its 10 deletes'):
        found = re.search(r'^%s +(%s) ms +(%s) ms +%sx$' % (
            re.escape(row), NUMBER, NUMBER, NUMBER), out, re.M)
        assert found, out
        assert float(found.group(1)) > 0 and float(found.group(2)) > 0, out
