#!/usr/bin/env bash
# All tests: what CI runs (.ci/run), one tox environment after another.
#   fresh            ci/bootstrap.sh on a bare Debian root, then the stages that
#                    need no cluster there: the pipeline (gitlab-ci-local runs
#                    the lint, policy and unit jobs) and the report in Chromium
#   faults           the main job's checks, smoke job and properties, then the
#                    availability properties and every fault case: one cluster
#   report           that run's report in headless Chromium
#   molecule         every role on its own, the VM scenarios on a real kernel
#   configurability  the same checks and properties on 3 nodes
#   teardown         interrupts at each phase, SIGKILL then the next run's sweep
#   concurrency      two main jobs at once, a second checkout beside them
# Each environment's time goes to runs/ci-timings.json (and is printed at the
# end); every environment runs even when one before it failed, as tox would.
# Extra arguments go to every pytest run.
set -uo pipefail
cd "$(dirname "$0")/.."
# REFARCH_CI_ENVS="faults report" runs only those (same timings file).
read -r -a ENVS <<<"${REFARCH_CI_ENVS:-fresh faults report molecule configurability teardown concurrency}"

interrupted=""
trap 'interrupted=TERM' TERM
trap 'interrupted=INT' INT
mkdir -p runs
timings=runs/ci-timings.tsv
: >"$timings"

t0=$EPOCHREALTIME
ci/bootstrap.sh
rc=$?
printf 'bootstrap\t%s\t%s\t%s\n' "$t0" "$EPOCHREALTIME" "$rc" >>"$timings"
failed=()
[ "$rc" -eq 0 ] || failed+=(bootstrap)
if [ "$rc" -eq 0 ]; then
    for env in "${ENVS[@]}"; do
        [ -z "$interrupted" ] || break
        t=$EPOCHREALTIME
        ci/tox -e "$env" -- "$@"
        rc=$?
        printf '%s\t%s\t%s\t%s\n' "$env" "$t" "$EPOCHREALTIME" "$rc" >>"$timings"
        [ "$rc" -eq 0 ] || failed+=("$env")
    done
fi
python3 - "$timings" "$t0" "$EPOCHREALTIME" "$interrupted" <<'EOF'
import json, os, platform, sys, time
rows = [line.split("\t") for line in open(sys.argv[1], encoding="utf-8").read().splitlines() if line]
total, interrupted = float(sys.argv[3]) - float(sys.argv[2]), sys.argv[4] or None
out = {"what": "ci/test.sh: seconds per tox environment (wall clock), exit status",
       "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": platform.node(),
       "cpus": os.cpu_count(), "total_s": round(total, 1), "interrupted": interrupted,
       "environments": [{"name": n, "seconds": round(float(end) - float(start), 1), "exit": int(rc)}
                        for n, start, end, rc in rows]}
json.dump(out, open("runs/ci-timings.json", "w", encoding="utf-8"), indent=2)
print("\nci/test.sh timings (runs/ci-timings.json):")
for env in out["environments"]:
    print(f"  {env['name']:<16} {env['seconds']:>7.1f} s  {'ok' if env['exit'] == 0 else 'FAILED (exit %d)' % env['exit']}")
print(f"  {'total':<16} {total:>7.1f} s ({total / 60:.1f} min)" + (f", interrupted by SIG{interrupted}" if interrupted else ""))
EOF
rm -f "$timings"
if [ -n "$interrupted" ]; then exit 130; fi
if [ "${#failed[@]}" -gt 0 ]; then
    echo "ci/test.sh: FAILED: ${failed[*]}" >&2
    exit 1
fi
