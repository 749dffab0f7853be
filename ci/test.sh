#!/usr/bin/env bash
# All tests: static checks, the policy scan, offline unit tests, then the
# main job on the local cloud, then the fault cases.  This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/bootstrap.sh
exec .venv/bin/tox -e lint,policy,unit,integration,faults -- "$@"
