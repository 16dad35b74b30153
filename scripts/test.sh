#!/usr/bin/env bash
# Set everything up, then run the whole test suite (arguments go to pytest).
#
# The tests mostly wait (on delays, servers, worker processes) rather than
# compute, so they run in ZD_TEST_WORKERS pytest-xdist workers (default 2,
# one per core of the CI machine: README, first section), each starting its
# own redis-server and Swift. --dist loadgroup keeps the tests of a module
# with module-scoped servers on one worker (tests/conftest.py).
# ZD_TEST_WORKERS=0 runs them in this one process.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bash "$here/scripts/setup.sh" test
cd "$here"
exec "${ZD_VENV:-$here/.venv}/bin/python" -m pytest -p no:cacheprovider \
    -o addopts="" -q -n "${ZD_TEST_WORKERS:-2}" --dist loadgroup "$@"
