"""``python -m benchmarks.swift_calls`` at a tiny size: a row per call
and round, each with the Swift servers' CPU measured (no figure is
asserted but that it was measured: these machines are shared)."""

import re

import pytest

from benchmarks import swift_calls

pytestmark = [pytest.mark.integration]


def test_prints_the_swift_cpu_of_each_call(capsys):
    swift_calls.main(['--calls', '2', '--rounds', '2'])
    out = capsys.readouterr().out
    rows = re.findall(r'^(post of 10|claim of 10 \+ its deletes) \((\d)\)'
                      r' +(\d+) ms$', out, re.M)
    assert [(name, number) for name, number, _ in rows] == [
        ('post of 10', '1'), ('claim of 10 + its deletes', '1'),
        ('post of 10', '2'), ('claim of 10 + its deletes', '2')], out
    assert all(int(cpu) > 0 for _, _, cpu in rows)
