#!/usr/bin/env bash
# The main job: deploy the Horovod reference architecture on the embedded
# local cloud, configure it with Ansible, check every node, smoke-train with
# Horovod across the nodes, tear everything down.  Extra arguments go to
# pytest (e.g. --keep, --set nodes.count=3).
set -euo pipefail
cd "$(dirname "$0")/.."
ci/bootstrap.sh
exec ci/tox -e integration -- "$@"
