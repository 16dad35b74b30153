"""``python -m benchmarks.sticky --backend swift`` at a tiny size: both
queues' claim latency and Swift requests per claim, and their ratio."""

import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_sticky_benchmark_on_swift_counts_the_same_requests_per_claim():
    result = subprocess.run(
        [sys.executable, '-m', 'benchmarks.sticky', '--backend', 'swift',
         '--groups', '12', '--clients', '2', '--claims', '2'],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert re.search(r'^pinned queue: 12 groups pinned to 2 other live '
                     r'clients', result.stdout, re.M), result.stdout
    requests = re.findall(
        r'^(none pinned|12 pinned) +claim median [\d.]+ ms, p99 [\d.]+ ms; '
        r'([\d.]+) Swift requests per claim$', result.stdout, re.M)
    assert [label for label, _ in requests] == ['none pinned', '12 pinned'], \
        result.stdout
    # Groups pinned to others are never listed nor read by our claims.
    assert requests[0][1] == requests[1][1], result.stdout
    assert re.search(r'^ratio \(pinned / none\): median \d+\.\d\d, p99 '
                     r'\d+\.\d\d \(target <= 1\.2\)$', result.stdout, re.M), \
        result.stdout
