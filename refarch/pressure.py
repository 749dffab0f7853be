"""What a node shows while a job crawls: memory pressure (major page faults,
its cgroup's memory limit reached, the OOM killer), CPU throttling by its
cgroup's quota, swap, and the machine's pressure stall information.

The job watch (:mod:`refarch.pytest.jobwatch`) reads every node with
:data:`PROBE` before a job and again when it stops one, and
:func:`diagnosis` says what grew in between: the figures that name why a
rank fell behind.  :func:`parse` and :func:`diagnosis` are pure functions,
tested on recorded readings.
"""

from __future__ import annotations

#: Major page faults per second of a node's cgroup over a job at which the
#: node is named as short of memory: a rank that thrashes re-reads its code
#: and data pages from disk (seen: thousands per second with a 700 MiB limit
#: under a 1.1 GiB rank); a healthy job after the first one faults from the
#: page cache (minor faults).
MAJOR_FAULTS_PER_S = 50.0

#: Share of a cgroup's CPU periods throttled by its quota at which a node is
#: named as CPU-throttled.
THROTTLED_SHARE = 0.2

#: Reads a node as root: ``key=value`` lines (:func:`parse`); with a
#: workload's file name as ``$1``, also its rank processes there: how many,
#: their states (R running, D waiting on disk, S sleeping), major page
#: faults and CPU clock ticks so far (``/proc/PID/stat``).  The cgroup
#: files are the node's own (v2 at the root of the mount, v1 under memory/
#: and cpu/); the pressure files in /proc/pressure are the machine's (a
#: container sees its host's).
PROBE = r"""
cg=/sys/fs/cgroup
if [ -f $cg/memory.max ]; then
  printf 'memory_limit=%s\n' "$(cat $cg/memory.max)"
  printf 'major_faults=%s\n' "$(awk '$1 == "pgmajfault" {print $2}' $cg/memory.stat)"
  printf 'limit_reached=%s\n' "$(awk '$1 == "max" {print $2}' $cg/memory.events)"
  printf 'oom_kills=%s\n' "$(awk '$1 == "oom_kill" {print $2}' $cg/memory.events)"
  printf 'cpu_periods=%s\n' "$(awk '$1 == "nr_periods" {print $2}' $cg/cpu.stat)"
  printf 'cpu_throttled=%s\n' "$(awk '$1 == "nr_throttled" {print $2}' $cg/cpu.stat)"
  printf 'throttled_ns=%s\n' "$(awk '$1 == "throttled_usec" {printf "%.0f\n", $2 * 1000}' $cg/cpu.stat)"
elif [ -d $cg/memory ]; then
  printf 'memory_limit=%s\n' "$(cat $cg/memory/memory.limit_in_bytes)"
  printf 'major_faults=%s\n' "$(awk '$1 == "total_pgmajfault" {print $2}' $cg/memory/memory.stat)"
  printf 'limit_reached=%s\n' "$(cat $cg/memory/memory.failcnt)"
  printf 'oom_kills=%s\n' "$(awk '$1 == "oom_kill" {print $2}' $cg/memory/memory.oom_control)"
  printf 'cpu_periods=%s\n' "$(awk '$1 == "nr_periods" {print $2}' $cg/cpu/cpu.stat)"
  printf 'cpu_throttled=%s\n' "$(awk '$1 == "nr_throttled" {print $2}' $cg/cpu/cpu.stat)"
  printf 'throttled_ns=%s\n' "$(awk '$1 == "throttled_time" {print $2}' $cg/cpu/cpu.stat)"
fi
printf 'swap_used_kib=%s\n' "$(awk '/^SwapTotal:/ {t = $2} /^SwapFree:/ {f = $2} END {printf "%.0f\n", t - f}' /proc/meminfo)"
for r in memory cpu; do
  [ -r /proc/pressure/$r ] && printf 'psi_%s=%s\n' "$r" "$(awk '$1 == "some" {print $2}' /proc/pressure/$r)"
done
if [ -n "$1" ]; then
  for p in $(pgrep -f "^[^ ]*python[^ ]* [^ ]*$1"); do cat /proc/$p/stat 2>/dev/null; echo; done |
    awk 'NF > 20 {sub(/^.*\) /, ""); n++; s = s $1; f += $10; c += $12 + $13}
         END {printf "rank_procs=%d\nrank_states=%s\nrank_major_faults=%.0f\nrank_cpu_ticks=%.0f\n", n, s, f, c}'
  printf 'clock_ticks=%s\n' "$(getconf CLK_TCK)"
fi
printf 't=%s\n' "$(date +%s.%N)"
"""


def parse(text: str) -> dict[str, str]:
    """:data:`PROBE`'s output -> {key: value}."""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def _grew(before: dict[str, str], after: dict[str, str], key: str) -> int:
    a, b = after.get(key, ""), before.get(key, "")
    return int(a) - int(b) if a.isdigit() and b.isdigit() else 0


def diagnosis(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What grew on one node between two readings (:func:`parse`) that slows
    a rank, each as a phrase ("memory: 41,230 major page faults (812/s),
    the cgroup's 700 MiB limit reached 9,120 times"); [] when nothing did.

    The machine's pressure (``psi_memory``, ``psi_cpu``: avg10 of "some")
    and swap are quoted with a finding, never one on their own: in a
    container they are the host's, shared by every node.
    """
    try:
        seconds = max(float(after["t"]) - float(before["t"]), 1e-3)
    except (KeyError, ValueError):
        seconds = 0.0
    out = []
    faults = _grew(before, after, "major_faults")
    reached = _grew(before, after, "limit_reached")
    oom = _grew(before, after, "oom_kills")
    memory = []
    if seconds and faults / seconds >= MAJOR_FAULTS_PER_S:
        memory.append(f"{faults:,} major page faults ({faults / seconds:,.0f}/s)")
    limit = after.get("memory_limit", "")
    if reached > 0 and limit.isdigit() and int(limit) < 1 << 60:
        memory.append(f"the cgroup's {int(limit) >> 20} MiB limit reached {reached:,} times")
    if oom > 0:
        memory.append(f"{oom} process(es) killed by the OOM killer")
    if memory:
        swap = int(after.get("swap_used_kib") or 0) >> 10
        psi = after.get("psi_memory", "")
        extra = ([f"machine's memory pressure {psi}"] if psi else []) + ([f"{swap} MiB swap in use"] if swap else [])
        out.append("memory: " + ", ".join(memory + extra))
    periods = _grew(before, after, "cpu_periods")
    throttled = _grew(before, after, "cpu_throttled")
    if periods and throttled / periods >= THROTTLED_SHARE:
        lost_s = _grew(before, after, "throttled_ns") / 1e9
        out.append(f"CPU: throttled by its cgroup's quota in {throttled:,} of {periods:,} periods "
                   f"({lost_s:.1f} s held back)")
    return out


def rank_activity(first: dict[str, str], second: dict[str, str]) -> tuple[float, int, str] | None:
    """What a node's rank processes did between two readings a few seconds
    apart (:data:`PROBE` with the workload's name): (CPU seconds per
    second, major page faults, their states at the second reading); None
    without rank processes in either."""
    try:
        if int(first["rank_procs"]) == 0 or int(second["rank_procs"]) == 0:
            return None
        seconds = max(float(second["t"]) - float(first["t"]), 1e-3)
        cpu_s = (int(second["rank_cpu_ticks"]) - int(first["rank_cpu_ticks"])) / int(second.get("clock_ticks") or 100)
        return cpu_s / seconds, int(second["rank_major_faults"]) - int(first["rank_major_faults"]), second["rank_states"]
    except (KeyError, ValueError):
        return None


#: CPU share and major faults per second of a node's ranks above which
#: they still work at a stop: a rank that waits for the others in a
#: collective used 0.01 CPU and no major fault (measured at F24's stop);
#: one that thrashes is starved of CPU but faults (0.3-1.5 CPU and
#: hundreds of faults in 3 s).
WORKING_CPU = 0.1
WORKING_FAULTS_PER_S = 3.0


def still_working(activity: tuple[float, int, str] | None, seconds: float) -> bool:
    """Whether a node's ranks were still at work (:func:`rank_activity`):
    above :data:`WORKING_CPU` or :data:`WORKING_FAULTS_PER_S`."""
    return activity is not None and (activity[0] >= WORKING_CPU or activity[1] >= WORKING_FAULTS_PER_S * seconds)
