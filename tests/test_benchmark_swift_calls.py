"""``python -m benchmarks.swift_calls`` at a tiny size: a row per call
and round, each with the Swift servers' CPU and the driver's own measured
(no figure is asserted but that it was measured: these machines are
shared); with
``--phases``, the requests of one call by kind (counts are asserted)."""

import re

import pytest

from benchmarks import swift_calls

pytestmark = [pytest.mark.integration]


def test_prints_the_swift_cpu_of_each_call(capsys):
    swift_calls.main(['--calls', '2', '--rounds', '2'])
    out = capsys.readouterr().out
    rows = re.findall(r'^(post of 10|claim of 10 \+ its deletes) \((\d)\)'
                      r' +(\d+) ms +([\d.]+) ms$', out, re.M)
    assert [(name, number) for name, number, _, _ in rows] == [
        ('post of 10', '1'), ('claim of 10 + its deletes', '1'),
        ('post of 10', '2'), ('claim of 10 + its deletes', '2')], out
    assert all(int(swift) > 0 and float(driver) > 0
               for _, _, swift, driver in rows)


def test_phases_print_each_kind_of_request_of_the_median_calls(capsys):
    swift_calls.main(['--phases', '--calls', '2'])
    out = capsys.readouterr().out
    sections = re.split(r'^(post of 10|claim of 10|delete): the median of '
                        r'(\d+), [\d.]+ ms .*$', out, flags=re.M)[1:]
    found = {name: (int(calls), dict(
        (kind, int(count)) for kind, count in re.findall(
            r'^  (\S+(?: \S+)?) +(\d+) +[\d.]+ - +[\d.]+ ms$', body, re.M)))
        for name, calls, body in zip(*[iter(sections)] * 3)}
    # The requests docs/swift.md counts for each call, in kind and number.
    assert found['post of 10'] == (2, {
        'get_container p/': 1, 'put_object p/': 10, 'put_object m/': 10,
        'head_object p/': 10, 'get_container h/': 1, 'put_object a/': 10}), out
    assert found['claim of 10'][1]['put_object l/'] == 10, out
    assert found['claim of 10'][1]['head_object l/'] == 10, out
    assert found['delete'][0] == 20, out
    assert found['delete'][1]['post_account'] == 1, out
    assert re.search(r"^Zaqar's Swift driver, the same calls: post of 10 "
                     r"[\d.]+ ms, claim of 10 [\d.]+ ms, delete [\d.]+ ms "
                     r"\(medians\)$", out, re.M), out
