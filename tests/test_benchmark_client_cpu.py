"""``python -m benchmarks.client_cpu`` at a tiny size: both figures and
their ratio are printed, measured with and without hiredis."""

import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_client_cpu_benchmark_prints_both_and_the_ratio():
    result = subprocess.run(
        [sys.executable, '-m', 'benchmarks.client_cpu', '--messages', '100',
         '--repeats', '1'], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    runs = re.findall(r'^hiredis (True|False) +CPU +([\d.]+) us/message',
                      result.stdout, re.M)
    assert sorted(used for used, _ in runs) == ['False', 'True'], \
        result.stdout
    assert all(float(cpu) > 0 for _, cpu in runs), result.stdout
    assert re.search(r'with / without \d+\.\d\dx$', result.stdout, re.M), \
        result.stdout
