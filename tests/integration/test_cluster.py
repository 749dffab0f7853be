"""Cluster checks: properties of all nodes together."""

import re

import pytest

from refarch.judge import causes, checks
from refarch.pytest.hosts import HOROVOD_PYTHON, probe_ssh, run_as

pytestmark = [pytest.mark.integration, pytest.mark.check_phase]


def test_node_count(hosts, profile, cluster, run_state):
    """As many nodes answer as the profile expects (a node that never came
    up leaves a smaller cluster that every other check would accept)."""
    want = profile.nodes.count
    answering = [n for n in hosts if not probe_ssh(cluster, run_state, n)]
    missing = checks.missing_nodes(want, answering)
    assert len(answering) == want and not missing, (
        f"profile {profile.name} expects {want} nodes, {len(answering)} answer ({', '.join(answering) or 'none'}): "
        f"missing {', '.join(missing) or '?'} (not in the cluster contract or not answering)")


def test_training_user_uid_consistent(reachable_hosts, profile):
    """The training user has one uid on every node (shared storage and MPI
    rely on it)."""
    name = profile.training_user.name
    uids = {n: str(h.user(name).uid if h.user(name).exists else "missing") for n, h in reachable_hosts.items()}
    assert not checks.inconsistent(uids), f"uid of {name} differs between nodes: {uids}"


def test_hostnames_unique(reachable_hosts):
    """Every node has its own hostname (MPI and NCCL treat equal names as
    one machine)."""
    names = {n: h.check_output("hostname") for n, h in reachable_hosts.items()}
    dup = checks.duplicated(names)
    assert not dup, "duplicate hostnames: " + "; ".join(f"{v!r} on {', '.join(ns)}" for v, ns in dup.items())


def test_mpirun_across_all_nodes(reachable_hosts, cluster, profile):
    """`mpirun` over the cluster hostfile, one rank per node, prints each
    node's hostname exactly once (and does so within a time limit)."""
    first = cluster.contract.node_names[0]
    n = len(reachable_hosts)
    peers = [p for p in cluster.contract.node_names if p != first]
    cut = causes.path_problems(cluster, reachable_hosts, [pair for p in peers for pair in ((first, p), (p, first))])
    if cut:
        pytest.fail(f"mpirun from {first} across {n} nodes not launched: network path: " + "; ".join(cut))
    since = {p: causes.clock(reachable_hosts[p]) for p in peers}
    r = run_as(reachable_hosts[first], profile.training_user.name,
               f"mpirun --hostfile /etc/openmpi/cluster-hostfile -np {n} hostname", timeout_s=120)
    daemon = checks.orted_error(f"{r.stdout}\n{r.stderr}")
    if r.rc == 124:
        pytest.fail(f"mpirun from {first} across {n} nodes timed out after 120 s"
                    + (f": {daemon}" if daemon else ""))
    if r.rc != 0:
        log = cluster.rundir.logs / "mpirun-check.log" if getattr(cluster, "rundir", None) else None
        if log:
            log.write_text(f"exit {r.rc}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}\n", encoding="utf-8")
        output = f"{r.stdout}\n{r.stderr}"
        cause = checks.root_cause(output) or (output.strip().splitlines() or [""])[-1][-300:]
        where = ""
        if "command not found" in cause:
            # mpirun starts orted over a non-interactive SSH shell on each node.
            lacking = [peer for peer in cluster.contract.node_names
                       if run_as(reachable_hosts[first], profile.training_user.name,
                                 f"ssh -o BatchMode=yes {peer} 'command -v orted'", timeout_s=30).rc != 0]
            where = f"; orted is not on the non-interactive PATH of {', '.join(lacking)}" if lacking else ""
        elif re.search(r"Permission denied|currently not available|unable to reliably start", output):
            # mpirun starts orted over SSH: the peer's sshd knows why it refused.
            refused = [why for why in (causes.login_refusal(reachable_hosts, cluster, first, p, since[p],
                                                             profile.training_user.name)
                                       for p in peers) if why]
            where = "".join(f"; {why}" for why in refused)
        where += f"; {daemon}" if daemon and daemon not in cause else ""
        pytest.fail(f"mpirun from {first} failed (exit {r.rc}): {cause}{where}"
                    + (f" (full output: {log})" if log else ""))
    seen = sorted(r.stdout.split())
    assert seen == sorted(cluster.contract.node_names), (
        f"mpirun from {first}: expected each of {sorted(cluster.contract.node_names)} once, got {seen}")


VERSION_PROBE = (
    "import importlib.metadata as m, json, platform, sys;"
    "d = {'python': platform.python_version()};"
    "[d.__setitem__(p, m.version(p)) for p in sys.argv[1:]];"
    "print(json.dumps(d))"
)


def test_versions_consistent(reachable_hosts, profile, results):
    """Python, TensorFlow, Horovod and OpenMPI versions are the same on every
    node (a node with another TensorFlow breaks Horovod's ops there)."""
    import json
    import shlex

    from refarch.paths import load_versions

    pins = load_versions()
    per_node = {}
    for name, host in reachable_hosts.items():
        r = run_as(host, profile.training_user.name,
                   f"{HOROVOD_PYTHON} -c {shlex.quote(VERSION_PROBE)} "
                   f"{pins['tensorflow_package']} horovod", timeout_s=60)
        versions = json.loads(r.stdout) if r.rc == 0 else {"error": r.stderr.strip()[-200:]}
        versions["openmpi"] = host.run("dpkg-query -W -f '${Version}' openmpi-bin").stdout.strip()
        per_node[name] = versions
    results.node_versions = per_node
    keys = sorted({k for v in per_node.values() for k in v})
    differing = [k for k in keys if checks.inconsistent({n: str(v.get(k)) for n, v in per_node.items()})]
    assert not differing, "versions differ between nodes: " + "; ".join(
        f"{k}: " + ", ".join(f"{n}={v.get(k)}" for n, v in sorted(per_node.items())) for k in differing)
