"""The job watch's judgement of a running job (refarch.stall) and its
description of a stopped one (refarch.pytest.jobwatch), on recorded
output: a healthy np=2 smoke job and one stalled by a node short of memory."""

from pathlib import Path

import pytest

from refarch import pressure, stall
from refarch.pytest import jobwatch

DATA = Path(__file__).parent / "data"
WATCH = stall.JobWatch(stall_s=90, straggler_factor=4, min_steps=3)


def _line(rank, stage, t, step=None, compute_s=None):
    out = f"[{rank}]<stdout>:REFARCH_PROGRESS rank={rank} stage={stage} t={t:.3f}"
    out += f" step={step}" if step is not None else ""
    return out + (f" compute_s={compute_s}" if compute_s is not None else "")


def test_healthy_job_is_never_stopped_between_its_lines():
    text = (DATA / "progress-np2-healthy.txt").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if "REFARCH_PROGRESS" in line]
    started = float(text.split("started_t=", 1)[1].split()[0])
    for i in range(1, len(lines) + 1):
        seen = "\n".join(lines[:i])
        ranks = stall.parse_progress(seen, 2)
        now = float(lines[min(i, len(lines) - 1)].split(" t=")[1].split()[0])
        assert stall.stop_reason(ranks, started, now, WATCH) is None, lines[i - 1]
    ranks = stall.parse_progress(text, 2)
    assert [p.where() for p in ranks.values()] == ["step 16", "step 16"]
    assert stall.straggler(ranks, 3)[1] < 1.5


def test_stalled_start_names_the_rank_behind():
    text = "\n".join([_line(0, "start", 100), _line(1, "start", 101), _line(0, "init", 102), _line(1, "init", 102),
                      _line(0, "ready", 104)])
    ranks = stall.parse_progress(text, 2)
    assert stall.stop_reason(ranks, 90, 150, WATCH) is None
    assert stall.stop_reason(ranks, 90, 194, WATCH) == "no rank got further for 90 s (stall window 90 s)"
    assert stall.slow_ranks(ranks, []) == [1]
    # A slow rank catching up to a stage the others passed does not reset the window.
    ranks = stall.parse_progress(text + "\n" + _line(1, "ready", 180), 2)
    assert stall.stop_reason(ranks, 90, 194, WATCH).startswith("no rank got further for 90 s")


def test_no_line_at_all_counts_from_the_start():
    ranks = stall.parse_progress("TensorFlow noise\n", 2)
    assert stall.stop_reason(ranks, 100, 189, WATCH) is None
    assert stall.stop_reason(ranks, 100, 190, WATCH).startswith("no rank got further for 90 s")
    assert [p.where() for p in ranks.values()] == ["no progress line", "no progress line"]


def test_straggler_is_stopped_after_min_steps():
    lines = [_line(0, "ready", 100), _line(1, "ready", 100)]
    for step in range(1, 4):
        lines += [_line(0, "step", 100 + 5 * step, step, 0.5), _line(1, "step", 100 + 5 * step, step, 2.5)]
    ranks = stall.parse_progress("\n".join(lines[:-2]), 2)
    assert stall.stop_reason(ranks, 90, 112, WATCH) is None
    ranks = stall.parse_progress("\n".join(lines), 2)
    assert stall.stop_reason(ranks, 90, 116, WATCH) == (
        "rank 1's median compute time per step is 5.0 x the fastest rank's (straggler factor 4)")
    assert stall.slow_ranks(ranks, []) == [1]


def test_horovod_missing_ranks_from_its_last_stall_warning():
    # The stall inspector's warning as horovodrun prefixes it (its format:
    # horovod/common/stall_inspector.cc); under Gloo on this machine it did
    # not appear within 100 s of a stall, so the watch does not need it.
    text = ("[0]<stderr>:[2026-12-06 03:50:01: W stall_inspector.cc:105] One or more tensors were submitted to be "
            "reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more "
            "than 30 seconds.\n[0]<stderr>:Missing ranks:\n[0]<stderr>:1: [HorovodAllreduce_grads_0]\n"
            "[0]<stderr>:2: [HorovodAllreduce_grads_0]\n[0]<stdout>:REFARCH_PROGRESS rank=0 stage=ready t=1.0\n")
    assert stall.horovod_missing_ranks(text) == [1, 2]
    assert stall.horovod_missing_ranks("no warning") == []


def test_recorded_stall_of_a_node_short_of_memory():
    """node2 limited to 700 MiB (fault F24): both ranks built the model, then
    rank 1 thrashed in its first step while rank 0 waited in the allreduce."""
    text = (DATA / "progress-np2-stalled.txt").read_text(encoding="utf-8")
    ranks = stall.parse_progress(text, 2)
    assert [p.where() for p in ranks.values()] == ["ready", "ready"]
    ready = min(p.reached_t for p in ranks.values())
    assert stall.stop_reason(ranks, ready - 20, ready + 89, WATCH) is None
    assert stall.stop_reason(ranks, ready - 20, ready + 93, WATCH) == (
        "no rank got further for 93 s (stall window 90 s)")
    assert stall.slow_ranks(ranks, []) == []


def test_rank_nodes_follow_the_host_list():
    assert jobwatch.rank_nodes("node1:1,node2:2") == ["node1", "node2", "node2"]


BEFORE = {"memory_limit": str(700 << 20), "major_faults": "120", "limit_reached": "0", "oom_kills": "0",
          "cpu_periods": "0", "cpu_throttled": "0", "throttled_ns": "0", "swap_used_kib": "0",
          "psi_memory": "avg10=0.00", "t": "1000.0"}


ACTIVE = {"rank_procs": "1", "rank_states": "S", "rank_major_faults": "10000", "rank_cpu_ticks": "1000",
          "clock_ticks": "100"}


def test_rank_activity_tells_a_working_rank_from_a_waiting_one():
    first = {**ACTIVE, "t": "10.0"}
    assert pressure.rank_activity(first, {**first, "rank_cpu_ticks": "1150", "t": "13.0"}) == (0.5, 0, "S")
    assert pressure.still_working((0.5, 0, "S"), 3.0)
    assert pressure.still_working((0.01, 200, "D"), 3.0)
    assert not pressure.still_working((0.01, 0, "S"), 3.0)
    assert pressure.rank_activity(first, {**first, "rank_procs": "0"}) is None
    assert pressure.rank_activity({}, first) is None


def test_memory_pressure_is_named_with_its_figures():
    after = {**BEFORE, "major_faults": "100120", "limit_reached": "5321", "psi_memory": "avg10=41.20", "t": "1100.0"}
    assert pressure.diagnosis(BEFORE, after) == [
        "memory: 100,000 major page faults (1,000/s), the cgroup's 700 MiB limit reached 5,321 times, "
        "machine's memory pressure avg10=41.20"]


def test_cpu_throttling_and_oom_are_named():
    before = {**BEFORE, "memory_limit": "9223372036854771712", "cpu_periods": "100", "cpu_throttled": "10"}
    after = {**before, "oom_kills": "1", "cpu_periods": "1100", "cpu_throttled": "910", "throttled_ns": "45000000000",
             "t": "1100.0"}
    assert pressure.diagnosis(before, after) == [
        "memory: 1 process(es) killed by the OOM killer, machine's memory pressure avg10=0.00",
        "CPU: throttled by its cgroup's quota in 900 of 1,000 periods (45.0 s held back)"]


@pytest.mark.parametrize("after", [dict(BEFORE, t="1100.0", major_faults="1120"), {}])
def test_a_quiet_or_unread_node_shows_nothing(after):
    assert pressure.diagnosis(BEFORE, after) == []


def test_parse_reads_the_recorded_probe():
    readings = pressure.parse((DATA / "pressure-probe-node1.txt").read_text(encoding="utf-8"))
    assert readings["memory_limit"] == "6442450944" and readings["oom_kills"] == "0"


def test_stopped_job_is_described_naming_node_and_pressure():
    ranks = stall.parse_progress("\n".join([_line(0, "ready", 104), _line(1, "init", 102)]), 2)
    after = {**BEFORE, "major_faults": "100120", "limit_reached": "7", "t": "1100.0"}
    text = jobwatch.describe_stop("no rank got further for 90 s (stall window 90 s)", 101.4, ranks, [1],
                                  ["node1", "node2"], {"node1": BEFORE, "node2": BEFORE},
                                  {"node1": BEFORE, "node2": after})
    assert text == ("stopped 101 s after its start: no rank got further for 90 s (stall window 90 s); "
                    "behind: rank 1 on node2 (init); the others at ready; "
                    "Horovod's stall check: missing rank(s) 1 on node2; "
                    "node2: memory: 100,000 major page faults (1,000/s), the cgroup's 700 MiB limit reached 7 times, "
                    "machine's memory pressure avg10=0.00")
    # All ranks as far: the node whose rank still works is the one behind.
    ranks = stall.parse_progress((DATA / "progress-np2-stalled.txt").read_text(encoding="utf-8"), 2)
    at_stop = {"node1": {**BEFORE, **ACTIVE, "rank_cpu_ticks": "5000", "t": "1097.0"},
               "node2": {**BEFORE, **ACTIVE, "t": "1097.0"}}
    after = {"node1": {**BEFORE, **ACTIVE, "rank_cpu_ticks": "5001", "t": "1100.0"},
             "node2": {**BEFORE, **ACTIVE, "rank_cpu_ticks": "1462", "rank_major_faults": "10876",
                       "major_faults": "10876", "t": "1100.0"}}
    text = jobwatch.describe_stop("no rank got further for 93 s (stall window 90 s)", 101, ranks, [],
                                  ["node1", "node2"], {"node1": BEFORE, "node2": BEFORE}, after, at_stop)
    assert "; all ranks at ready; behind: the rank on node2 (1.54 CPU, 876 major faults in 3 s, state S); " \
           "waiting for it: node1 (0.00 CPU, 0 major faults in 3 s, state S); node2: memory: 10,756" in text
    # The rank on node2 was killed (its process gone), or nothing tells the
    # ranks apart but node2's pressure.
    gone = {**after, "node2": {**after["node2"], "rank_procs": "0"}}
    text = jobwatch.describe_stop("x", 101, ranks, [], ["node1", "node2"], {"node1": BEFORE, "node2": BEFORE},
                                  gone, at_stop)
    assert "behind: the rank on node2 (its process is gone; the others wait for it)" in text
    idle = {n: {**r, "rank_cpu_ticks": at_stop[n]["rank_cpu_ticks"], "rank_major_faults": "10000"}
            for n, r in after.items()}
    text = jobwatch.describe_stop("x", 101, ranks, [], ["node1", "node2"], {"node1": BEFORE, "node2": BEFORE},
                                  idle, at_stop)
    assert "behind: the rank on node2 (the only node under pressure)" in text
    quiet = jobwatch.describe_stop("x", 5, ranks, [], ["node1", "node2"], {}, {"node2": {"error": "timed out"}})
    assert quiet.endswith("node2: not read (timed out)")


def test_the_pressure_probe_prints_whole_numbers_on_this_machine():
    import subprocess

    out = subprocess.run(["sh", "-c", pressure.PROBE, "probe", "no-such-workload.py"], capture_output=True,
                         text=True, check=True).stdout
    readings = pressure.parse(out)
    for key in ("major_faults", "limit_reached", "oom_kills", "cpu_periods", "throttled_ns", "swap_used_kib",
                "rank_procs", "rank_major_faults", "rank_cpu_ticks"):
        assert readings.get(key, "0").isdigit(), (key, readings.get(key))
    assert readings["rank_procs"] == "0"


def test_an_interrupted_watch_stops_its_job(monkeypatch):
    """SIGINT while a job runs: the detached job and its ranks are stopped
    before the interrupt goes on (a kept cluster keeps no stray job)."""
    from types import SimpleNamespace

    sent = []

    def fake_run_as(host, user, command, timeout_s=60):
        sent.append(command)
        if "setsid" in command:
            return SimpleNamespace(rc=0, stdout="pid=42 t=1000.0\n", stderr="")
        if "stat -c %s" in command:
            raise KeyboardInterrupt
        return SimpleNamespace(rc=0, stdout="", stderr="")

    class Host:
        def run(self, command):
            return SimpleNamespace(rc=0, stdout="t=1000.0\n", stderr="")

    monkeypatch.setattr(jobwatch, "run_as", fake_run_as)
    monkeypatch.setattr(jobwatch.time, "sleep", lambda s: None)
    with pytest.raises(KeyboardInterrupt):
        jobwatch.watched_run({"node1": Host(), "node2": Host()}, "node1", "hvd", "horovodrun ...", "node1:1,node2:1",
                             "tf2_synthetic_benchmark.py", "job-np2", WATCH, 900)
    assert any("pkill -TERM -s" in c for c in sent)
    assert sum("pkill -KILL -u $(id -u) -f tf2_synthetic_benchmark.py" in c for c in sent) == 2
