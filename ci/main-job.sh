#!/usr/bin/env bash
# The main job: deploy the Horovod reference architecture on the embedded
# local cloud, configure it with Ansible, check every node, smoke-train with
# Horovod across the nodes, tear everything down.  Extra arguments go to
# pytest (e.g. --keep, --set nodes.count=3).
set -euo pipefail
cd "$(dirname "$0")/.."
ci/bootstrap.sh
# Arguments are checked before anything runs: --help prints the suite's
# usage; a bad profile or --set key is one line, printed last, exit 2.
ci/tox -q -e integration --notest >/dev/null
rc=0
.tox/integration/bin/python -m refarch check-args "$@" || rc=$?
if [ "$rc" -eq 3 ]; then exit 0; elif [ "$rc" -ne 0 ]; then exit "$rc"; fi
exec ci/tox -e integration -- "$@"
