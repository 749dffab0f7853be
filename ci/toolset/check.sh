#!/usr/bin/env bash
# Proves a toolset image: its commands answer, and the lint, policy and unit
# stages (tox.ini's commands, run with the image's tools, no tox) pass on a
# copy of this checkout (mounted read-only, copied inside the container).
# Last, the OpenStack-from-the-image command shape of
# docs/how-to/point-at-openstack.md: a clouds.yaml
# mounted read-only where openstacksdk looks is what the suite reads, and an
# unreachable endpoint stops the run in one line before anything is made.
#   ci/toolset/check.sh [IMAGE]   (default: `python -m refarch toolset build`,
#                                 which builds the current tag unless podman has it)
set -euo pipefail
cd "$(dirname "$0")/../.."
# A failed build says why on stderr (refarch: error: ..., the failed
# command's last lines) after naming its log.
image=${1:-$(python -m refarch toolset build | tail -n 1)}
run=(podman run --rm --runtime runc --ulimit nofile=1024:4096 --ulimit nproc=4096:8192)
for cmd in "refarch --help" "terraform version" "ansible --version" "checkov --version"; do
    echo "== podman run --rm $image $cmd"
    # Whole output first: `| head` under pipefail fails the check when
    # head has gone before podman writes its last line (SIGPIPE).
    out=$("${run[@]}" "$image" $cmd)
    head -n 3 <<<"$out"
done
echo "== lint, policy, unit stages in $image"
"${run[@]}" --name "refarch-toolset-check-$$" -v "$PWD:/src:ro" -e PYTHONDONTWRITEBYTECODE=1 "$image" bash -c '
    set -euo pipefail
    # Other runs may write and remove files in the checkout meanwhile (CI
    # runs lanes beside this one): a file that changes or goes while tar
    # reads it is its exit 1, not an error; caches are left out.
    mkdir /w
    tar -C /src --exclude=./.tox --exclude=./.venv --exclude=./runs --exclude=__pycache__ \
        --exclude=.pytest_cache --exclude="*.egg-info" --exclude=./ci/gitlab-ci-local/node_modules \
        --exclude=./.gitlab-ci-local --ignore-failed-read --warning=no-file-changed \
        --warning=no-file-removed -cf /tmp/src.tar . || [ $? -eq 1 ]
    tar -C /w -xf /tmp/src.tar && rm /tmp/src.tar
    cd /w
    for stage in lint policy unit; do
        start=$SECONDS
        python -m refarch toolset stage $stage >/tmp/$stage.log 2>&1 && rc=0 || rc=$?
        tail -n 4 /tmp/$stage.log
        echo "stage $stage: exit $rc ($((SECONDS - start)) s)"
        [ "$rc" -eq 0 ] || { tail -n 60 /tmp/$stage.log; exit "$rc"; }
    done'
echo "== OpenStack from the image: clouds.yaml mounted read-only, runs on a volume"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/clouds.yaml" <<'YAML'
clouds:
  refarch-ci:
    auth:
      auth_url: http://127.0.0.1:9/v3
      username: u
      password: p
      project_name: p
      user_domain_name: Default
      project_domain_name: Default
YAML
mkdir "$work/runs"
out=$("${run[@]}" -v "$work/clouds.yaml:/etc/openstack/clouds.yaml:ro" -v "$work/runs:/runs" \
      -e REFARCH_RUNS_DIR=/runs "$image" python -m refarch up --profile openstack-v100 2>&1) && rc=0 || rc=$?
grep '^refarch: error' <<<"$out" | cut -c1-160 || true
# The suite read the mounted entry (it names the entry and its endpoint) and
# stopped before creating anything: exit 2, nothing under the runs volume.
if [ "$rc" -ne 2 ] || ! grep -q '^refarch: error: cloud refarch-ci: endpoint unreachable' <<<"$out" \
   || [ -n "$(ls -A "$work/runs")" ]; then
    echo "ci/toolset/check.sh: the OpenStack path from the image did not fail fast on the mounted clouds.yaml (exit $rc)" >&2
    echo "$out" | tail -n 20 >&2
    exit 1
fi
echo "toolset image $image: OK"
