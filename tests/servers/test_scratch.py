"""Scratch directories (localstack/scratch.py): the configs and logs of
the servers a run starts stay while the run lasts and go when it ends."""

import os
import subprocess
import sys

from localstack import scratch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def test_a_scratch_directory_lasts_while_its_process_runs():
    path = scratch.scratch_dir('zd-test-scratch-')
    assert os.path.isdir(path)
    assert os.path.basename(path).startswith('zd-test-scratch-')


def test_a_scratch_directory_and_its_files_go_when_the_process_ends():
    code = ('from localstack import scratch; import os; '
            'path = scratch.scratch_dir("zd-test-scratch-"); '
            'open(os.path.join(path, "zaqar.log"), "w").write("x"); '
            'print(path)')
    done = subprocess.run([sys.executable, '-c', code], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    path = done.stdout.strip()
    assert path and not os.path.exists(path), done
