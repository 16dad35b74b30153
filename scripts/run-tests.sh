#!/usr/bin/env bash
# Run the test suite in an environment scripts/setup.sh already built
# (arguments go to pytest); scripts/test.sh sets up first, then runs this.
#
# The tests run in ZD_TEST_WORKERS pytest-xdist workers (default 2, one per
# core of the CI machine: README, first section; the suite keeps both busy),
# each starting its own redis-server and Swift. --dist loadgroup keeps the
# tests of a module with module-scoped servers on one worker
# (tests/conftest.py). ZD_TEST_WORKERS=0 runs them in this one process.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
# The servers the tests start fsync their writes (Swift's object and
# container servers, append-only Redis); on RAM-backed /dev/shm that is
# free, on a disk shared with other jobs it slows the whole suite. Used when
# it has room (a container's default /dev/shm is 64 MiB).
shm_free_kib=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 {print $4}')
if [ -z "${TMPDIR:-}" ] && [ -w /dev/shm ] && \
        [ "${shm_free_kib:-0}" -gt $((4 * 1024 * 1024)) ]; then
    export TMPDIR=/dev/shm
fi
exec "${ZD_VENV:-$here/.venv}/bin/python" -m pytest -p no:cacheprovider \
    -o addopts="" -q -n "${ZD_TEST_WORKERS:-2}" --dist loadgroup "$@"
