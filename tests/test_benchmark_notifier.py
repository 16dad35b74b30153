"""``python -m benchmarks.notifier`` at a tiny size: a row per count of
consumers on each backend, with the round trips counted on Redis only."""

import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_notifier_benchmark_prints_a_row_per_backend_and_count():
    result = subprocess.run(
        [sys.executable, '-m', 'benchmarks.notifier', '--consumers', '0,3',
         '--posts', '3'],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    sections = re.split(r'^#### ', result.stdout, flags=re.M)[1:]
    assert [s.split(':')[0].split(' ')[0] for s in sections] == \
        ['Redis', 'MongoDB'], result.stdout
    row = r'^ +{:,} +[\d.]+ ms +[\d.]+ ms +{} +[\d.]+x +{} +{}$'
    redis, mongodb = sections
    for count in (0, 3):
        assert re.search(row.format(count, r'[\d.]+ ms', r'[\d.]+x',
                                    r'\d+/\d+/\d+'), redis, re.M), redis
        # Round trips are counted on Redis connections only.
        assert re.search(row.format(count, '-', '-', '-/-/-'), mongodb,
                         re.M), mongodb
