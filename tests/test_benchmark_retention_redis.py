"""``python -m benchmarks.retention_redis`` at a tiny size: each section
prints its figures and ratios (a gc pass over registered queues included,
which reads the store's layout version first)."""

import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_retention_benchmark_on_redis_prints_every_section():
    result = subprocess.run(
        [sys.executable, '-m', 'benchmarks.retention_redis', '--posted',
         '400', '--length', '100', '--queues', '3', '--queue-size', '40',
         '--claims', '10'],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    for line in (r'ratios \(retention / without\): post throughput '
                 r'[\d.]+x .*\(target <= 1\.2\); claim Redis CPU median '
                 r'[\d.]+x',
                 r'cleanup pass \(gc\) over 3 queues, .*ratio [\d.]+x / '
                 r'[\d.]+x \(target <= 2\)',
                 r'removal per-message cost ratio, \d[\d,]* vs \d[\d,]*: '
                 r'[\d.]+x wall, [\d.]+x Redis CPU \(O\(N\): about 1\)'):
        assert re.search('^' + line + '$', result.stdout, re.M), \
            result.stdout
