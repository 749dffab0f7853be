#!/usr/bin/env bash
# All tests: what CI runs (.ci/run).
#   fresh            ci/bootstrap.sh on a bare Debian root, then the stages that
#                    need no cluster there: the pipeline (gitlab-ci-local runs
#                    the lint, policy and unit jobs) and the report in Chromium
#   teardown         interrupts at each phase, SIGKILL then the next run's sweep
#   concurrency      two main jobs at once, a second checkout beside them
#   byhand           the README's "Deploy the architecture yourself" lines on
#                    the local cloud, from a folder outside the repository
#   toolset          the toolset image built (cached by its inputs' hash),
#                    the lint, policy and unit stages inside it
#   molecule         every role on its own, the VM scenarios on a real kernel
#   faults:checks    the fault cases judged by checks alone, on their cluster
#   faults:figures   the main job's checks, smoke job and properties, then the
#                    availability properties and the fault cases that judge
#                    figures or stop nodes: one cluster
#   report           that run's report in headless Chromium
#   configurability  the same checks and properties on 3 nodes
# Each environment's time, and how busy the machine's CPUs were while it ran,
# go to runs/ci-timings.json (and are printed at the end), with the whole
# run's busy CPU seconds and their floor (busy seconds / CPUs: the least wall
# time this work can take here, however it is arranged); every environment
# runs even when one before it failed, as tox would.
# Extra arguments go to every pytest run.
#
# Lanes: in REFARCH_CI_ENVS, "a,b+c,d" runs lane a then b beside lane c then
# d (each lane's output goes to runs/ci-logs/ENV.log and is printed when the
# group ends; every lane's resources carry their own run id and owner, as two
# CI jobs on one machine would).  Only environments that judge no figure
# belong in lanes; the figures part of faults (faults:figures) and
# configurability judge images/sec, efficiency, busbw and recovery times and
# run alone, after the lanes.  Recovery times too: with the availability
# properties in a lane beside the fresh root, teardown and concurrency
# proofs, availability.kill_recovery_s measured 45.1 s against 30.2 alone
# (upper bound 40, calibrated on a quiet machine).  The default runs, beside
# the fresh root and the teardown proofs, each in a lane of its own, the
# concurrency proof, the role scenarios and the fault cases judged by checks
# alone (faults:checks, on a cluster of their own): on 2 cores the fresh root
# and a teardown proof leave about a third of the CPUs idle (they wait on
# Debian's mirror, npm and their child runs), and the role scenarios build
# the node image, the wheelhouse and the VM image meanwhile.  On a machine
# that trains 4-5x slower than the one the references were calibrated on,
# one environment after another ran past CI's 90 minutes.  (The concurrency
# proof once ran its check-build past its 120 s limit beside a kept
# cluster's availability runs; its check-build took 47 s beside one other
# cluster's work on that slower machine.)
set -uo pipefail
cd "$(dirname "$0")/.."
# REFARCH_CI_ENVS="faults report" runs only those (same timings file).
read -r -a GROUPS_ <<<"${REFARCH_CI_ENVS:-fresh,teardown+concurrency,byhand,toolset+molecule+faults:checks faults:figures report configurability}"
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

# cpu_ticks: "busy total" jiffies of all CPUs since boot (/proc/stat).
cpu_ticks() {
    awk '/^cpu /{busy=$2+$3+$4+$7+$8; print busy, busy+$5+$6+$9; exit}' /proc/stat
}

# tox_env ENTRY: the tox environment of an entry of REFARCH_CI_ENVS (an
# entry ENV:PART runs part of ENV, see part_args).
tox_env() { echo "${1%%:*}"; }

# part_args ENTRY: pytest arguments that select the part.  faults:checks is
# the fault cases judged by checks alone (refarch.faults.base.Fault.alone is
# false: no figure, no node stopped), which may run in a lane on a cluster
# of their own; faults:figures is the rest of the faults environment (the
# main job's tests, the availability properties, the fault cases that judge
# figures or stop nodes), which runs alone.  The two together are the faults
# environment.
BESIDE="test_fault_is_caught and not runs_alone"
part_args() {
    case "$1" in
        faults:checks) PART=(-k "$BESIDE") ;;
        faults:figures) PART=(-k "not ($BESIDE)") ;;
        *:*) echo "ci/test.sh: unknown part $1 (parts: faults:checks, faults:figures)" >&2; return 2 ;;
        *) PART=() ;;
    esac
}

# run_env ENTRY LANE [LOG]: one tox environment (or part); its row goes to the timings.
run_env() {
    local env=$1 lane=$2 log=${3:-} t=$EPOCHREALTIME rc cpu0 cpu1 PART
    cpu0=$(cpu_ticks)
    if ! part_args "$env"; then
        rc=2
    elif [ -n "$log" ]; then
        ci/tox -e "$(tox_env "$env")" -- "${PART[@]}" "${EXTRA[@]}" >"$log" 2>&1
    else
        ci/tox -e "$(tox_env "$env")" -- "${PART[@]}" "${EXTRA[@]}"
    fi
    rc=${rc:-$?}
    cpu1=$(cpu_ticks)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$env" "$t" "$EPOCHREALTIME" "$rc" "$lane" "$cpu0" "$cpu1" >>"$timings"
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
cpu0=$(cpu_ticks)
ci/bootstrap.sh
rc=$?
printf 'bootstrap\t%s\t%s\t%s\t\t%s\t%s\n' "$t0" "$EPOCHREALTIME" "$rc" "$cpu0" "$(cpu_ticks)" >>"$timings"
if [ "$rc" -eq 0 ]; then
    # Every tox environment is made before any runs, one after another: two
    # lanes (or the teardown proof that runs plain `tox -e faults`) never make
    # one environment at the same time.
    read -r -a entries <<<"${GROUPS_[*]//[+,]/ }"
    # integration too: ci/refarch (the byhand lines call it) makes it on first use.
    envs=$(for e in "${entries[@]}" integration; do tox_env "$e"; done | awk '!seen[$0]++' | paste -sd, -)
    ci/tox -q -e "$envs" --notest >/dev/null || echo "ci/test.sh: making the tox environments $envs failed" >&2
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
python3 - "$timings" "$t0" "$EPOCHREALTIME" "$interrupted" "$cpu0" "$(cpu_ticks)" <<'EOF' || summary=$?
import json, os, platform, sys, time
rows = [line.split("\t") for line in open(sys.argv[1], encoding="utf-8").read().splitlines() if line]
t0, total, interrupted = float(sys.argv[2]), float(sys.argv[3]) - float(sys.argv[2]), sys.argv[4] or None
# The whole run's busy CPU time (every process on the machine), in
# seconds: divided by the CPUs it is the least wall time the same work
# could take here, however it were arranged.
(busy0, _), (busy1, _) = (map(int, sys.argv[5].split()), map(int, sys.argv[6].split()))
cpu_s = (busy1 - busy0) / os.sysconf("SC_CLK_TCK")


def busy(cpu0, cpu1):
    """Share of the machine's CPU time that was busy between two readings
    of /proc/stat (every process on the machine, the other lane's too)."""
    (b0, t0_), (b1, t1) = (map(int, cpu0.split()), map(int, cpu1.split()))
    return round((b1 - b0) / (t1 - t0_), 2) if t1 > t0_ else None


out = {"what": "ci/test.sh: seconds per tox environment (wall clock), when it started (seconds after the "
               "bootstrap began), exit status, and how busy the machine's CPUs were meanwhile (0-1, /proc/stat); "
               "cpu_busy_s: busy CPU seconds of the whole run (every process on the machine), cpu_floor_s: "
               "those over the CPUs, the least wall time of this work here",
       "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": platform.node(),
       "cpus": os.cpu_count(), "total_s": round(total, 1), "interrupted": interrupted,
       "cpu_busy_s": round(cpu_s, 1), "cpu_floor_s": round(cpu_s / os.cpu_count(), 1),
       "lanes": "environments with a lane ran beside the other lane of their group",
       "environments": [{"name": n, "seconds": round(float(end) - float(start), 1),
                         "started_s": round(float(start) - t0, 1), "exit": int(rc), "cpu_busy": busy(c0, c1),
                         **({"lane": lane} if lane else {})} for n, start, end, rc, lane, c0, c1 in rows]}
json.dump(out, open("runs/ci-timings.json", "w", encoding="utf-8"), indent=2)
print("\nci/test.sh timings (runs/ci-timings.json):")
for env in out["environments"]:
    print(f"  {env['name']:<16} {env['seconds']:>7.1f} s  {'ok' if env['exit'] == 0 else 'FAILED (exit %d)' % env['exit']}"
          + f"  (CPUs {100 * env['cpu_busy']:.0f} % busy)" * (env["cpu_busy"] is not None)
          + (f"  (lane {env['lane']})" if "lane" in env else ""))
with open("runs/ci-failed.txt", "w", encoding="utf-8") as f:
    f.write(" ".join(e["name"] for e in out["environments"] if e["exit"] != 0))
print(f"  {'total':<16} {total:>7.1f} s ({total / 60:.1f} min)" + (f", interrupted by SIG{interrupted}" if interrupted else ""))
print(f"  {'CPU time':<16} {cpu_s:>7.1f} s busy on {os.cpu_count()} CPUs: at least {cpu_s / os.cpu_count() / 60:.1f} min "
      "of wall time for this work here, however arranged")
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
    # A lane's output was printed when its group ended, far above: the end
    # of each failed environment's log again, next to the verdict (a CI
    # job log is often read from its end only).
    for env in $failed; do
        [ -f "runs/ci-logs/$env.log" ] || continue
        echo "=================== ci/test.sh: FAILED $env: the last 40 lines of runs/ci-logs/$env.log ==================="
        tail -n 40 "runs/ci-logs/$env.log" | cut -c1-400
    done
    echo "ci/test.sh: FAILED: $failed" >&2
    exit 1
fi
