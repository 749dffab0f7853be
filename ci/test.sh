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
#
# Lanes, for runners with more cores: in REFARCH_CI_ENVS, "a,b+c,d" runs
# lane a then b beside lane c then d (each lane's output goes to
# runs/ci-logs/ENV.log and is printed when the group ends; every lane's
# resources carry their own run id and owner, as two CI jobs on one machine
# would).  Only environments that judge no figure belong in lanes (role
# scenarios, the fresh root, the lifecycle proofs); faults and
# configurability judge images/sec, efficiency and recovery times and run
# alone.  The default runs everything one after another: on 2 cores the
# lanes "molecule,fresh+teardown,concurrency" saved 3.4 of 63 min and made
# the lifecycle proofs 1.5-2.6x slower (a kept cluster's jobs ran beside
# them), one past a 120 s check timeout.
set -uo pipefail
cd "$(dirname "$0")/.."
# REFARCH_CI_ENVS="faults report" runs only those (same timings file).
read -r -a GROUPS_ <<<"${REFARCH_CI_ENVS:-fresh faults report molecule configurability teardown concurrency}"
EXTRA=("$@")

interrupted=""
lane_pids=()
stop_lanes() {
    interrupted=$1
    for pid in "${lane_pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
}
trap 'stop_lanes TERM' TERM
trap 'stop_lanes INT' INT
mkdir -p runs runs/ci-logs
timings=runs/ci-timings.tsv
: >"$timings"

# run_env ENV LANE [LOG]: one tox environment; its row goes to the timings.
run_env() {
    local env=$1 lane=$2 log=${3:-} t=$EPOCHREALTIME rc
    if [ -n "$log" ]; then
        ci/tox -e "$env" -- "${EXTRA[@]}" >"$log" 2>&1
    else
        ci/tox -e "$env" -- "${EXTRA[@]}"
    fi
    rc=$?
    printf '%s\t%s\t%s\t%s\t%s\n' "$env" "$t" "$EPOCHREALTIME" "$rc" "$lane" >>"$timings"
    return "$rc"
}

# lane ENV,ENV...: the environments one after another, output to their logs.
# A signal reaches ci/tox (same process group) and is acted on once that
# environment has torn down: no later environment starts.
lane() {
    local stop="" env
    trap 'stop=1' TERM INT
    IFS=, read -r -a envs <<<"$1"
    for env in "${envs[@]}"; do
        [ -z "$stop" ] || break
        run_env "$env" "$1" "runs/ci-logs/$env.log"
    done
}

t0=$EPOCHREALTIME
ci/bootstrap.sh
rc=$?
printf 'bootstrap\t%s\t%s\t%s\t\n' "$t0" "$EPOCHREALTIME" "$rc" >>"$timings"
if [ "$rc" -eq 0 ]; then
    for group in "${GROUPS_[@]}"; do
        [ -z "$interrupted" ] || break
        if [[ "$group" != *[+,]* ]]; then
            run_env "$group" ""
            continue
        fi
        IFS=+ read -r -a lanes <<<"$group"
        echo "ci/test.sh: lanes at once: ${lanes[*]} (output in runs/ci-logs/, printed when they end)"
        lane_pids=()
        for l in "${lanes[@]}"; do
            IFS=, read -r -a envs <<<"$l"
            for env in "${envs[@]}"; do rm -f "runs/ci-logs/$env.log"; done
            set -m  # each lane in its own process group, so that a signal can reach it whole
            lane "$l" &
            lane_pids+=($!)
            set +m
        done
        for pid in "${lane_pids[@]}"; do
            while kill -0 "$pid" 2>/dev/null; do wait "$pid"; done
        done
        lane_pids=()
        for l in "${lanes[@]}"; do
            IFS=, read -r -a envs <<<"$l"
            for env in "${envs[@]}"; do
                [ -f "runs/ci-logs/$env.log" ] || continue
                echo "=================== ci/test.sh: output of $env (lane $l) ==================="
                cat "runs/ci-logs/$env.log"
            done
        done
    done
fi
summary=0
python3 - "$timings" "$t0" "$EPOCHREALTIME" "$interrupted" <<'EOF' || summary=$?
import json, os, platform, sys, time
rows = [line.split("\t") for line in open(sys.argv[1], encoding="utf-8").read().splitlines() if line]
total, interrupted = float(sys.argv[3]) - float(sys.argv[2]), sys.argv[4] or None
out = {"what": "ci/test.sh: seconds per tox environment (wall clock), exit status",
       "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": platform.node(),
       "cpus": os.cpu_count(), "total_s": round(total, 1), "interrupted": interrupted,
       "lanes": "environments with a lane ran beside the other lane of their group",
       "environments": [{"name": n, "seconds": round(float(end) - float(start), 1), "exit": int(rc),
                         **({"lane": lane} if lane else {})} for n, start, end, rc, lane in rows]}
json.dump(out, open("runs/ci-timings.json", "w", encoding="utf-8"), indent=2)
print("\nci/test.sh timings (runs/ci-timings.json):")
for env in out["environments"]:
    print(f"  {env['name']:<16} {env['seconds']:>7.1f} s  {'ok' if env['exit'] == 0 else 'FAILED (exit %d)' % env['exit']}"
          + (f"  (lane {env['lane']})" if "lane" in env else ""))
with open("runs/ci-failed.txt", "w", encoding="utf-8") as f:
    f.write(" ".join(e["name"] for e in out["environments"] if e["exit"] != 0))
print(f"  {'total':<16} {total:>7.1f} s ({total / 60:.1f} min)" + (f", interrupted by SIG{interrupted}" if interrupted else ""))
EOF
rm -f "$timings"
failed=$(cat runs/ci-failed.txt 2>/dev/null)
rm -f runs/ci-failed.txt
if [ -n "$interrupted" ]; then exit 130; fi
if [ "$summary" -ne 0 ]; then
    echo "ci/test.sh: FAILED: the timings summary could not be written (exit $summary)" >&2
    exit 1
fi
if [ -n "$failed" ]; then
    echo "ci/test.sh: FAILED: $failed" >&2
    exit 1
fi
