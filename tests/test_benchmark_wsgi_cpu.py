"""``python -m benchmarks.wsgi_cpu`` at a tiny size: every driver's row
and both ratios are printed, each figure measured (above zero)."""

import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def run(*args):
    return subprocess.run(
        [sys.executable, '-m', 'benchmarks.wsgi_cpu', *args],
        capture_output=True, text=True, timeout=300)


def test_prints_each_drivers_cpu_per_message_and_the_ratios():
    result = run('--requests', '3', '--rounds', '2')
    assert result.returncode == 0, result.stderr
    assert re.search(r'median of 2 round\(s\) of 3 requests of 10',
                     result.stdout), result.stdout
    rows = dict(re.findall(r'^(ours|zaqar|ceiling) +([\d.]+ +[\d.]+)$',
                           result.stdout, re.M))
    assert sorted(rows) == ['ceiling', 'ours', 'zaqar'], result.stdout
    assert all(float(figure) > 0
               for row in rows.values() for figure in row.split()), \
        result.stdout
    for other in ('zaqar', 'ceiling'):
        assert re.search(r'^ratio ours / %s +\d+\.\d\dx +\d+\.\d\dx$' % other,
                         result.stdout, re.M), result.stdout


def test_a_size_below_one_is_refused():
    # Tried: no request per phase, then no round.
    for args in (('--requests', '0'), ('--rounds', '0')):
        result = run(*args)
        assert result.returncode == 2, result.stdout
        assert 'must be at least 1' in result.stderr
