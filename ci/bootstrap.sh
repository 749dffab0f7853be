#!/usr/bin/env bash
# Installs what the suite needs on a fresh Debian 12 machine: system packages
# with apt (when run as root; otherwise prints the exact command) and tox in
# .venv.  Idempotent: a warm machine passes through in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(podman runc debootstrap openssh-client rsync util-linux iproute2 uidmap)
missing=()
for pkg in "${PACKAGES[@]}"; do
    dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
        echo "bootstrap: installing ${missing[*]}" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        echo "bootstrap: missing system packages; run: sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
fi
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then
        echo "bootstrap: installing python3-venv" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    else
        echo "bootstrap: python3 cannot make virtualenvs; run: sudo apt-get install -y python3-venv" >&2
        exit 1
    fi
fi
if ! command -v terraform >/dev/null 2>&1; then
    echo "bootstrap: terraform (>= 1.4) is not on PATH; install HashiCorp's terraform package (apt repository or release zip) and retry" >&2
    exit 1
fi
if [ ! -x .venv/bin/tox ]; then
    python3 -m venv .venv
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q "tox>=4.11,<5"
fi
