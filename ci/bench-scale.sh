#!/usr/bin/env bash
# The suite's cost per node (refarch/bench.py): the main job with the scale
# profile at N = 2, 4, 8, each phase's seconds and their growth per added
# node into validation/scale-bench.json and .svg. About 45 min here.
#   ci/bench-scale.sh [--nodes 2,4,8] [-- pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
ci/bootstrap.sh
[ -x .tox/integration/bin/python ] || .venv/bin/tox -e integration --notest -q >/dev/null
exec .tox/integration/bin/python -m refarch.bench scale "$@"
