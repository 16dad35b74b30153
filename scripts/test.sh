#!/usr/bin/env bash
# Set everything up, then run the whole test suite (arguments go to pytest).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bash "$here/scripts/setup.sh" test
cd "$here"
exec "${ZD_VENV:-$here/.venv}/bin/python" -m pytest -p no:cacheprovider \
    -o addopts="" -q "$@"
