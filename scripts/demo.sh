#!/usr/bin/env bash
# Set up, then run a local Zaqar on the zaqar-delay Redis driver (with its
# own redis-server) and a short demo over Zaqar's REST API.
# "scripts/demo.sh --serve" keeps Zaqar running afterwards until Ctrl-C.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bash "$here/scripts/setup.sh" run
cd "$here"
exec "${ZD_VENV:-$here/.venv}/bin/python" tools/demo.py "$@"
