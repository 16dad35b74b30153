#!/usr/bin/env bash
# Install a real OpenStack Swift (Debian packages) for the integration tests.
#
# Idempotent: does nothing if every binary the test fixture needs is already
# present.  Must run as root (or via sudo).  Daemons are NOT started: the
# Debian maintainer scripts go through invoke-rc.d, which we block with a
# temporary policy-rc.d (exit 101) if none is in place.  The test fixture
# (localstack/swift_server.py) never uses /etc/swift or the init scripts;
# it writes its own configs into a temp dir and starts the servers itself.
set -euo pipefail

PACKAGES=(swift swift-proxy swift-account swift-container swift-object
          swift-object-expirer memcached)
# memcached: the proxy's tempauth middleware refuses to issue tokens without
# a cache; the fixture runs its own memcached on a free loopback port.
BINARIES=(swift-proxy-server swift-account-server swift-container-server
          swift-object-server swift-ring-builder swift-object-expirer memcached)

missing=()
for b in "${BINARIES[@]}"; do
    command -v "$b" >/dev/null 2>&1 || [ -x "/usr/bin/$b" ] || missing+=("$b")
done
if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-swift: swift binaries already present, nothing to do"
    exit 0
fi
echo "install-swift: missing ${missing[*]}; installing ${PACKAGES[*]}"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        echo "install-swift: must be run as root (or have sudo)" >&2; exit 1
    fi
fi

# Keep maintainer scripts from starting swift/rsyslog daemons.
POLICY=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
    $SUDO chmod 0755 "$POLICY"
    created_policy=1
fi
cleanup() { if [ "$created_policy" -eq 1 ]; then $SUDO rm -f "$POLICY"; fi; }
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
# Only refresh the package lists when apt cannot see the packages yet.
if ! apt-cache show swift-proxy >/dev/null 2>&1 \
   || [ -z "$(apt-cache policy swift-proxy 2>/dev/null | awk '/Candidate:/ {print $2}' | grep -v '(none)')" ]; then
    $SUDO apt-get update -q
fi
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends "${PACKAGES[@]}"

for b in "${BINARIES[@]}"; do
    command -v "$b" >/dev/null 2>&1 || { echo "install-swift: $b still missing" >&2; exit 1; }
done
echo "install-swift: done"
