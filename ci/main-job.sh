#!/usr/bin/env bash
# The main job: deploy the Horovod reference architecture on the embedded
# local cloud, configure it with Ansible, check every node, smoke-train with
# Horovod across the nodes, tear everything down.  Extra arguments go to
# pytest (e.g. --keep, --set nodes.count=3).  The job's wall time (bootstrap
# included, cold or warm) goes to runs/main-job-timings.json.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$EPOCHREALTIME
ci/bootstrap.sh
bootstrap_end=$EPOCHREALTIME
# Arguments are checked before anything runs: --help prints the suite's
# usage; a bad profile or --set key is one line, printed last, exit 2.
ci/tox -q -e integration --notest >/dev/null
rc=0
.tox/integration/bin/python -m refarch check-args "$@" || rc=$?
if [ "$rc" -eq 3 ]; then exit 0; elif [ "$rc" -ne 0 ]; then exit "$rc"; fi
# tox runs in the foreground: Ctrl-C and a CI runner's SIGTERM reach it (and
# pytest) directly, and this script waits for their teardown.
trap 'true' TERM INT
rc=0
ci/tox -e integration -- "$@" || rc=$?
.tox/integration/bin/python -m refarch.report.timings --started "$started" --bootstrap-end "$bootstrap_end" \
    --exit "$rc" || true
exit "$rc"
