#!/usr/bin/env bash
# Set everything up, then run the whole test suite (arguments go to
# pytest; scripts/run-tests.sh says how it runs).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bash "$here/scripts/setup.sh" test
exec bash "$here/scripts/run-tests.sh" "$@"
