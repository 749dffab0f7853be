#!/usr/bin/env bash
# Installs what the suite needs on a fresh Debian 12 machine: the Debian
# package of every host command in ci/host-commands.tsv for the given stages
# (default: all) that is not on PATH yet, with apt when run as root
# (otherwise prints the exact command); a command already there, from
# whatever source, is kept as it is.  Checks the commands that are not from
# Debian (terraform, go), puts tox (with tox-uv) in .venv and builds the
# pinned Terraform providers into the suite's cache.  Idempotent: a warm machine passes through in seconds.
#   ci/bootstrap.sh [STAGE...]
set -euo pipefail
cd "$(dirname "$0")/.."
TABLE=ci/host-commands.tsv

want_stage() {  # $1: the row's stages (comma-separated); stages asked for in STAGES
    [ "${#STAGES[@]}" -eq 0 ] && return 0
    local s
    for s in "${STAGES[@]}"; do
        case ",$1," in *",$s,"*) return 0 ;; esac
    done
    return 1
}

present() {  # a command on PATH, or a file for rows that name a path (/usr/include/node/node.h)
    case "$1" in /*) [ -e "$1" ] ;; *) command -v "$1" >/dev/null 2>&1 ;; esac
}

STAGES=("$@")
packages=()
external=()
while IFS=$'\t' read -r cmd pkg stages why; do
    case "$cmd" in ''|'#'*) continue ;; esac
    want_stage "$stages" || continue
    if [ "$pkg" = "-" ]; then
        external+=("$cmd	$why")
    elif ! present "$cmd"; then
        packages+=("$pkg")
    fi
done < "$TABLE"

missing=()
for pkg in $(printf '%s\n' "${packages[@]}" | sort -u); do
    missing+=("$pkg")
done
# python3 must be able to make virtualenvs (ensurepip): Debian splits it out.
dpkg-query -W -f '${Status}' python3-venv 2>/dev/null | grep -q "install ok installed" || missing+=(python3-venv)
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
for row in "${external[@]}"; do
    cmd=${row%%	*}
    if ! present "$cmd"; then
        echo "bootstrap: $cmd is not on PATH: ${row#*	}" >&2
        exit 1
    fi
done
# tox with tox-uv (tox.ini's requires): uv makes each environment from one
# package cache in seconds.
if [ ! -x .venv/bin/tox ] || [ ! -x .venv/bin/uv ]; then
    [ -x .venv/bin/python ] || python3 -m venv .venv
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q "tox>=4.11,<5" "tox-uv>=1.37,<2"
fi
# Terraform's providers that the OpenStack module pins, built with Go into
# the suite's mirror (the registry is out of reach; a warm machine builds
# nothing): refarch/tools/providers.py.
.venv/bin/python -c 'import yaml' 2>/dev/null || .venv/bin/pip install -q "PyYAML>=6"
.venv/bin/python -m refarch.tools.providers >/dev/null
