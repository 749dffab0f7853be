#!/usr/bin/env bash
# All tests: static checks, the policy scan, offline unit tests, the GitLab
# pipeline run by gitlab-ci-local, the bootstrap on a bare Debian root, the main job on the local cloud, the fault
# cases, the teardown proofs (interrupts) and the concurrent-runs proof.
# This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/bootstrap.sh
exec ci/tox -e lint,policy,unit,pipeline,fresh,integration,report,molecule,configurability,faults,availability,teardown,concurrency -- "$@"
