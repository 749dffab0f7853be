#!/usr/bin/env bash
# All tests, in two tiers (what CI runs: .ci/run).  The environments, their
# tiers and inputs are in ci/environments.yml; refarch/ci/ runs them.
#
#   ci/test.sh               the bootstrap, the change tier (every time), then
#                            the heavy environments that have no pass on this
#                            machine for their current inputs, as many as fit
#                            the budget (REFARCH_CI_BUDGET_S seconds after this
#                            script started, default in ci/environments.yml:
#                            it ends within 60 min); what did not fit is listed
#                            at the end and in runs/ci-timings.json as pending
#   ci/test.sh --all         every environment, whatever the records and budget
#                            (GitLab's schedules and tags)
#   ci/test.sh --only ENV    one environment (repeatable)
#
# Other arguments go to every pytest run.  `python -m refarch.ci plan` (in a
# tox environment: ci/refarch ci plan) says what a run would do now, and why.
set -uo pipefail
cd "$(dirname "$0")/.."
# This is CI: a check whose tool is missing fails instead of skipping
# (refarch/pytest/tools.py), as it does under GitLab, which sets CI.
export CI="${CI:-true}"
started=$EPOCHREALTIME
# Bad input is one line before anything is made: --only names an environment
# of ci/environments.yml (molecule:<scenario> for a folder of
# descriptors/ansible/molecule).
prev=""
for arg in "$@"; do
    if [ "$prev" = --only ]; then
        case "$arg" in
            molecule:*) [ -f "descriptors/ansible/molecule/${arg#molecule:}/molecule.yml" ] ;;
            *) grep -q "^  ${arg}:\$" ci/environments.yml ;;
        esac || { echo "ci/test.sh: no CI environment '$arg' (ci/environments.yml; molecule:<scenario> for a role)" >&2; exit 2; }
    fi
    prev=$arg
done
if [ -n "${REFARCH_CI_BUDGET_S+set}" ] && ! [[ "$REFARCH_CI_BUDGET_S" =~ ^[0-9]+([.][0-9]+)?$ && "$REFARCH_CI_BUDGET_S" != 0 ]]; then
    echo "ci/test.sh: REFARCH_CI_BUDGET_S='$REFARCH_CI_BUDGET_S': give the budget in seconds, a number above 0" >&2
    exit 2
fi
ci/bootstrap.sh || exit $?
# Every tox environment is made before any runs, one after another: two
# environments that run at once never make one at the same time.
envs=$(awk '$1 == "tox:" {print $2}' ci/environments.yml | awk '!seen[$0]++' | paste -sd, -)
if ! ci/tox -q -e "$envs" --notest >/dev/null; then
    echo "ci/test.sh: making the tox environments $envs failed (ci/tox -e $envs --notest says why)" >&2
    exit 1
fi
exec .tox/integration/bin/python -m refarch.ci run --started "$started" \
    --bootstrap-s "$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$started" "$EPOCHREALTIME")" "$@"
