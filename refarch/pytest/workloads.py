"""Training workloads on the deployed cluster, as session fixtures that the
smoke checks and the properties share (each workload runs once per session).

- ``single_rank_run`` / ``training_runs``: the synthetic-data benchmark
  (``tf2_synthetic_benchmark.py``) at np=1 and np=N, one rank per node.
- ``convergence_runs``: the digits convergence workload
  (``digits_convergence.py``) at np=1 and np=N.

Each run's whole output goes to ``logs/<workload>-np<N>.log`` in the run
directory; a failure quotes the root-cause line and names that file.
"""

from __future__ import annotations

import json
import shlex
import time
from contextlib import contextmanager

import pytest

from .. import progress
from ..judge import causes, checks
from ..properties import communication, figures
from . import jobwatch
from .hosts import HOROVOD_PYTHON, run_as

#: Bytes per training step the cluster interface must carry at least during
#: np=N: any model's gradients are larger; what else crosses the interface
#: meanwhile (SSH, the shared storage) is far less (seen: 3.2 GB received
#: plus sent per node for 15 ResNet-50 steps at 64x64, batch 16).
MIN_BYTES_PER_STEP = 1 << 20


#: Workloads that report each rank's progress (``rank_progress.py``): their
#: jobs are watched (:mod:`refarch.pytest.jobwatch`) and stopped when they
#: stall instead of waiting out ``timeouts_s.smoke``.
WATCHED = ("tf2_synthetic_benchmark.py", "digits_convergence.py")


def horovodrun(hosts, first: str, profile, script_args: str, hostlist: str, world_size: int, log=None) -> dict:
    """Run ``<venv>/bin/<script_args>`` with horovodrun (Gloo) on ``hostlist``
    (``node1:1,node2:1``) from node ``first`` as the training user; return
    the parsed ``REFARCH_RESULT`` dict.  Across nodes Horovod is pinned to
    the cluster interface; a single-host run talks over loopback
    (horovodrun rejects an interface pin there).  A workload of
    :data:`WATCHED` runs watched, with Horovod's stall check at the
    profile's ``job_watch.horovod_stall_check_s``.

    Fails the test (pytest.fail) past ``timeouts_s.smoke`` seconds, when
    the watch stopped the job (naming the rank and node behind and what the
    nodes show), or when the job prints no result, quoting the root-cause
    line of its output.
    """
    name = script_args.split()[0]
    watch = profile.job_watch
    pin = ' --network-interface "$REFARCH_CLUSTER_IFACE"' if world_size > 1 else ""
    stall_check = f" --stall-check-warning-time-seconds {watch.horovod_stall_check_s}" if name in WATCHED else ""
    script = f"{HOROVOD_PYTHON} $(dirname $(command -v horovodrun))/{script_args}"
    gloo_timeout = profile.smoke.gloo_timeout_s
    gloo_timeout_arg = f" --gloo-timeout-seconds {gloo_timeout}" if gloo_timeout else ""
    cmd = (f"cd /tmp && horovodrun --gloo -np {world_size} -H {hostlist}{pin}{stall_check}"
           f" --start-timeout {profile.smoke.start_timeout_s}{gloo_timeout_arg} {script}")
    user, limit_s = profile.training_user.name, profile.timeouts_s.smoke
    where = f" (full output: {log})" if log is not None else ""
    what = f"horovodrun {name} np={world_size} on {hostlist}"
    with progress.heartbeat(what, log=log):
        if name in WATCHED:
            job = f"{name.removesuffix('.py')}-np{world_size}"
            r = jobwatch.watched_run(hosts, first, user, cmd, hostlist, name, job, watch, limit_s)
            rc, out = r.rc, r.output
            if log is not None:
                log.write_text(f"$ {cmd}\nexit {rc}\nstarted_t={r.started_t:.3f} seconds={r.seconds:.1f}\n"
                               f"{r.stopped}\n--- output\n{out}\n", encoding="utf-8")
            if r.stopped:
                pytest.fail(f"{what} {r.stopped}{where}")
        else:
            done = run_as(hosts[first], user, cmd, timeout_s=limit_s)
            rc, out = done.rc, f"{done.stdout}\n{done.stderr}"
            if log is not None:
                log.write_text(f"$ {cmd}\nexit {rc}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}\n",
                               encoding="utf-8")
            if rc == 124:
                pytest.fail(f"{what} ran past {limit_s} s{where}")
    try:
        return checks.parse_training_result(out)
    except ValueError:
        cause = checks.cause_line(out)
        hint = checks.gloo_bind_hint(out) or checks.gloo_timeout_hint(out, jobwatch.rank_nodes(hostlist))
        cause += f": {hint}" if hint else ""
        pytest.fail(f"{what} failed (exit {rc}): {cause}{where}")


def benchmark_args(profile, batch_size: int | None = None) -> str:
    """The synthetic benchmark's command line from the profile's ``smoke``
    (``batch_size`` images per rank per step; default smoke.batch_size).
    Jobs at np > 1 time rank 0 alone in ``smoke.baseline_rounds`` rounds
    beside their own steps (their np=1 baseline); with 0 the option is
    left out (a tree whose benchmark predates it runs too)."""
    s = profile.smoke
    return (f"tf2_synthetic_benchmark.py --model {shlex.quote(s.model)} --image-size {s.image_size}"
            f" --batch-size {batch_size or s.batch_size} --warmup-steps {s.warmup_steps} --steps {s.steps}"
            f" --intra-op-threads {s.intra_op_threads}"
            + (f" --baseline-rounds {s.baseline_rounds}" if s.baseline_rounds else ""))


def convergence_args(profile, global_batch: int | None = None) -> str:
    """The digits workload's command line from the profile's ``convergence``
    (``global_batch`` images per step over all ranks; default the profile's)."""
    c = profile.convergence
    return (f"digits_convergence.py --epochs {c.epochs} --global-batch-size {global_batch or c.global_batch_size}"
            f" --learning-rate {c.learning_rate} --test-fraction {c.test_fraction} --seed {c.seed}")


def log_path(cluster, name: str):
    """``<run dir>/logs/<name>``, or None without a run directory."""
    rundir = getattr(cluster, "rundir", None)
    return rundir.logs / name if rundir is not None else None


def prelaunch_problems(hosts, cluster, iface: str) -> list[str]:
    """Nodes where the interface Horovod will be pinned to does not carry the
    node's cluster address (Gloo would fail with "Unable to find address")."""
    problems = []
    for node in cluster.contract.nodes:
        have = hosts[node.name].run(f"ip -o -4 addr show dev {shlex.quote(iface)} 2>&1").stdout
        if f" {node.address}/" not in have:
            actual = causes.interface_of(hosts[node.name], node.address)
            problems.append(f"{node.name}: interface {iface} does not carry its cluster address {node.address} "
                            f"(its cluster interface is {actual or 'missing'})")
    return problems


def cluster_iface_bytes(hosts, cluster) -> dict[str, int]:
    """Bytes received plus sent so far (kernel counters) on each node's
    cluster interface."""
    out = {}
    for node in cluster.contract.nodes:
        h = hosts[node.name]
        iface = causes.interface_of(h, node.address)
        stats = f"/sys/class/net/{iface}/statistics"
        out[node.name] = sum(int(v) for v in h.check_output(f"cat {stats}/rx_bytes {stats}/tx_bytes").split())
    return out


def routes_elsewhere(hosts, cluster, name: str) -> list[str]:
    """Peers of node ``name`` whose cluster address its routing table sends
    out by another interface than the one carrying its own cluster address
    (``ip -o route get``): "traffic to node2 (10.0.0.3) leaves by eth1, not
    eth0"; empty when every peer is reached over the cluster interface."""
    h = hosts[name]
    own = causes.interface_of(h, cluster.contract.node(name).address)
    out = []
    for peer in cluster.contract.nodes:
        if peer.name == name:
            continue
        dev = causes.route_interface(h.run(f"ip -o route get {peer.address}").stdout) or "?"
        if dev != own:
            out.append(f"traffic to {peer.name} ({peer.address}) leaves by {dev}, not {own}")
    return out


def loopback_problem(host, name: str, user: str) -> str:
    """Why ranks on node ``name`` cannot meet over loopback, or "": TCP to
    127.0.0.1:22 that times out (a refusal is an answer: loopback works).
    horovodrun runs a job whose hosts are all local over ``lo``."""
    r = run_as(host, user, "timeout 3 bash -c 'exec 3<>/dev/tcp/127.0.0.1/22' 2>/dev/null; echo rc=$?", timeout_s=30)
    if "rc=124" in r.stdout:
        return f"{name}: TCP to 127.0.0.1:22 timed out after 3 s (loopback filtered)"
    return ""


@contextmanager
def timed(results, phase: str):
    """Add the seconds the block takes to ``results.test_phases_s[phase]``."""
    start = time.monotonic()
    try:
        yield
    finally:
        spent = time.monotonic() - start
        results.test_phases_s[phase] = round(results.test_phases_s.get(phase, 0) + spent, 1)


def _launch_across(hosts, cluster, profile) -> None:
    """Fail before launching np=N when the pinned interface is wrong on a node."""
    first = hosts[cluster.contract.node_names[0]]
    iface = run_as(first, profile.training_user.name, 'echo "$REFARCH_CLUSTER_IFACE"', timeout_s=30).stdout.strip()
    problems = prelaunch_problems(hosts, cluster, iface)
    if problems:
        pytest.fail(f"not launched: Horovod would be pinned to {iface or '(unset)'}: " + "; ".join(problems))
    # Every rank talks to every other: a faulty path hangs the job until
    # its timeout, so it is named before the launch (refarch.judge.causes).
    names = cluster.contract.node_names
    cut = causes.path_problems(cluster, hosts, [(a, b) for a in names for b in names if a != b])
    if cut:
        pytest.fail("not launched across nodes: network path: " + "; ".join(cut))


def _launch_alone(hosts, first: str, profile) -> None:
    """Fail before launching np=1 on ``first`` when loopback is filtered
    there (the job would wait out its start timeout)."""
    blocked = loopback_problem(hosts[first], first, profile.training_user.name)
    if blocked:
        pytest.fail(f"not launched at np=1: {blocked}: a single-host job's ranks meet over loopback "
                    "(horovodrun uses lo when every host is local)")


@pytest.fixture(scope="session")
def single_rank_run(cluster, hosts, profile, results) -> dict:
    """The benchmark at np=1 on the first node (judged on its own: a failure
    across nodes does not hide whether one rank trains)."""
    first = cluster.contract.node_names[0]
    _launch_alone(hosts, first, profile)
    with timed(results, "smoke"):
        run = horovodrun(hosts, first, profile, benchmark_args(profile), f"{first}:1", 1,
                         log_path(cluster, "smoke-np1.log"))
    run["log"] = str(log_path(cluster, "smoke-np1.log"))
    results.smoke["runs"] = [run]
    results.smoke["config"] = profile.smoke.model_dump()
    return run


@pytest.fixture(scope="session")
def training_runs(request, cluster, hosts, profile, results) -> dict:
    """np=1 and np=N (one rank per node): {world size: result dict}; np=1
    left out when it failed (``test_training_single_rank`` says why: a
    failure on one node does not hide whether the ranks train across
    nodes).  Before launching across nodes, the interface Horovod is pinned
    to must carry the cluster address on every node; the cluster
    interfaces' byte counters around np=N go into the result
    (``cluster_iface_bytes``)."""
    names = cluster.contract.node_names
    try:
        runs = {1: request.getfixturevalue("single_rank_run")}
    except pytest.fail.Exception:
        runs = {}
    if len(names) > 1:
        _launch_across(hosts, cluster, profile)
        log = log_path(cluster, f"smoke-np{len(names)}.log")
        with timed(results, "smoke"):
            before = cluster_iface_bytes(hosts, cluster)
            run = horovodrun(hosts, names[0], profile, benchmark_args(profile),
                             ",".join(f"{n}:1" for n in names), len(names), log)
            after = cluster_iface_bytes(hosts, cluster)
        run["cluster_iface_bytes"] = {n: after[n] - before[n] for n in names}
        run["log"] = str(log)
        runs[len(names)] = run
        results.smoke["runs"] = list(runs.values())
    return runs


@pytest.fixture(scope="session")
def scaling_runs(training_runs, cluster, hosts, profile, results) -> list[dict]:
    """The scaling table: for every (batch size, world size) of
    :meth:`refarch.profile.Profile.scaling_points`, images/sec and
    efficiency as medians with their 95 % intervals
    (:func:`refarch.properties.figures.scaling_row`); world size w runs one rank on
    each of the first w nodes.  The smoke runs (np=1, np=N at the smoke
    batch size) are reused.  Fails naming the log when a job's step times
    give no figure."""
    names = cluster.contract.node_names
    by_point = {(profile.smoke.batch_size, w): r for w, r in training_runs.items()}
    for batch, world_size in profile.scaling_points():
        if (batch, world_size) in by_point:
            continue
        if world_size > 1:
            _launch_across(hosts, cluster, profile)
        else:
            _launch_alone(hosts, names[0], profile)
        log = log_path(cluster, f"scaling-b{batch}-np{world_size}.log")
        with timed(results, "smoke"):
            run = horovodrun(hosts, names[0], profile, benchmark_args(profile, batch),
                             ",".join(f"{n}:1" for n in names[:world_size]), world_size, log)
        run["log"] = str(log)
        by_point[(batch, world_size)] = run
    table = []
    for batch, world_size in profile.scaling_points():
        run = by_point[(batch, world_size)]
        try:
            row = figures.scaling_row(run, by_point[(batch, 1)])
        except ValueError as exc:
            pytest.fail(f"batch {batch} np={world_size}: no figure from its step times: {exc} "
                        f"(full output: {run.get('log')})")
        table.append({**row, "log": run.get("log")})
    results.smoke["scaling"] = table
    return table


@pytest.fixture(scope="session")
def convergence_runs(cluster, hosts, profile, results) -> dict:
    """The digits workload at np=1 and np=N: {world size: result dict}.
    Both use the same global batch: the profile's, rounded down to a
    multiple of N so that it splits evenly over the ranks (32 -> 30 at N=3)."""
    names = cluster.contract.node_names
    global_batch = profile.convergence.global_batch_size
    global_batch -= global_batch % len(names)
    runs = {}
    for world_size in sorted({1, len(names)}):
        hostlist = ",".join(f"{n}:1" for n in names[:world_size])
        if world_size > 1:
            _launch_across(hosts, cluster, profile)
        log = log_path(cluster, f"convergence-np{world_size}.log")
        with timed(results, "properties"):
            run = horovodrun(hosts, names[0], profile, convergence_args(profile, global_batch), hostlist,
                             world_size, log)
        run["log"] = str(log)
        runs[world_size] = run
    results.convergence = {"config": profile.convergence.model_dump(), "runs": list(runs.values())}
    return runs


#: Port the iperf3 server of a pair listens on while it is measured (between
#: members: the network policy admits it).
IPERF_PORT = 5201


def iperf3_bytes_per_sec(client, server_host, server_address: str, user: str, seconds: int = 3) -> float:
    """Raw TCP throughput from ``client`` to ``server_address`` in bytes/s
    (iperf3, one stream, ``seconds`` long, received side).  The one-off
    server on ``server_host`` is stopped afterwards, also on failure.

    Raises:
        RuntimeError: iperf3 failed; the message names both ends and
            iperf3's error.
    """

    pidfile = "/tmp/.refarch-iperf3.pid"
    start = run_as(server_host, user, f"iperf3 -s -1 -D -p {IPERF_PORT} -I {pidfile}", timeout_s=30)
    try:
        if start.rc != 0:
            raise RuntimeError(f"iperf3 server did not start: {(start.stderr or start.stdout).strip()[:300]}")
        r = run_as(client, user, f"iperf3 -c {server_address} -p {IPERF_PORT} -t {seconds} -J --connect-timeout 5000",
                   timeout_s=seconds + 30)
        data = json.loads(r.stdout or "{}")
        if "error" in data:
            raise RuntimeError(f"iperf3 to {server_address}:{IPERF_PORT} failed: {data['error']}")
        if r.rc != 0 or "end" not in data:
            raise RuntimeError(f"iperf3 to {server_address}:{IPERF_PORT} failed (exit {r.rc}): "
                               f"{(r.stderr or r.stdout).strip()[:300]}")
        return data["end"]["sum_received"]["bits_per_second"] / 8
    finally:
        run_as(server_host, user, f"test -f {pidfile} && kill $(cat {pidfile}) 2>/dev/null; rm -f {pidfile}; true",
               timeout_s=30)


def allreduce_args(profile) -> str:
    """The allreduce benchmark's command line from ``communication``."""
    c = profile.communication
    return (f"allreduce_bench.py --sizes-mib {','.join(str(s) for s in c.sizes_mib)}"
            f" --warmup {c.warmup} --iterations {c.iterations}")


@pytest.fixture(scope="session")
def communication_runs(cluster, hosts, profile, results) -> list[dict]:
    """For each pair of nodes (a, b) of :func:`refarch.properties.communication.node_pairs`: raw TCP a -> b
    (iperf3, bytes/s) and Horovod's allreduce bus bandwidth between them per message size
    (``allreduce_bench.py`` at np=2); one dict per pair.  A pair that cannot
    be measured is reported with ``error`` naming both nodes."""
    user = profile.training_user.name
    names = cluster.contract.node_names
    pairs = []
    with timed(results, "properties"):
        if len(names) > 1:
            _launch_across(hosts, cluster, profile)
        for a, b in communication.node_pairs(names, profile.communication.pairs):
            pair = {"pair": [a, b]}
            try:
                pair["tcp_Bps"] = iperf3_bytes_per_sec(hosts[a], hosts[b], cluster.contract.node(b).address, user,
                                                       profile.communication.tcp_seconds)
            except RuntimeError as exc:
                pair["error"] = f"{a} -> {b}: {exc}"
                pairs.append(pair)
                continue
            log = log_path(cluster, f"allreduce-{a}-{b}.log")
            run = horovodrun(hosts, a, profile, allreduce_args(profile), f"{a}:1,{b}:1", 2, log)
            pair["sizes"] = [{**s, "busbw_to_tcp": s["busbw_Bps"] / pair["tcp_Bps"]} for s in run["sizes"]]
            pair["log"] = str(log)
            pairs.append(pair)
    results.communication = {"config": profile.communication.model_dump(), "pairs": pairs}
    return pairs
