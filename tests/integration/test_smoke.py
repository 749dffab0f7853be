"""Smoke job: Horovod trains on one node and across all of them, and the
gradients cross the cluster interface.  The workloads are session fixtures
(refarch.pytest.workloads); their figures are judged in test_properties.py."""

import pytest

from refarch.judge import causes
from refarch.pytest.workloads import MIN_BYTES_PER_STEP, routes_elsewhere

pytestmark = [pytest.mark.integration, pytest.mark.run_phase("smoke")]


def test_training_single_rank(single_rank_run):
    """np=1 trains and reports a positive throughput (images/sec)."""
    run = single_rank_run
    assert run["world_size"] == 1 and run["images_per_sec"] > 0, f"np=1 run reported {run}"


def test_training_on_all_nodes(training_runs, cluster):
    """np=N really ran one rank on each of the N distinct nodes."""
    n = len(cluster.contract.node_names)
    if n == 1:
        pytest.skip("profile has one node: nothing runs across nodes")
    run = training_runs[n]
    assert run["world_size"] == n, f"np={n} run reported world size {run['world_size']}"
    assert sorted(run["hosts"]) == sorted(cluster.contract.node_names), (
        f"np={n} ranks ran on {run['hosts']}, expected one on each of {cluster.contract.node_names}")


def test_training_used_the_cluster_interface(training_runs, cluster, hosts, profile):
    """Every rank's Gloo traffic went over the interface that carries its
    node's cluster address: as the run reports it, and as the interface's
    byte counters show (the gradients crossed it)."""
    n = max(training_runs)
    run = training_runs[n]
    wrong = []
    steps = profile.smoke.warmup_steps + profile.smoke.steps
    for host_name, moved in sorted(run.get("cluster_iface_bytes", {}).items()):
        if moved < steps * MIN_BYTES_PER_STEP:
            wrong.append(f"{host_name}: its cluster interface carried {moved / 1e6:.1f} MB during np={n} "
                         f"({steps} steps; at least {steps * MIN_BYTES_PER_STEP / 1e6:.0f} MB expected)"
                         + "".join(f": {where}" for where in routes_elsewhere(hosts, cluster, host_name)))
    for host_name, iface in zip(run["hosts"], run["gloo_ifaces"], strict=True):
        address = cluster.contract.node(host_name).address
        want = causes.interface_of(hosts[host_name], address)
        if iface != want:
            wrong.append(f"{host_name}: Gloo used {iface or 'no interface'!r}, cluster interface is {want!r}")
    assert not wrong, "; ".join(wrong)


def test_scaling_table(scaling_runs, profile, cluster):
    """Every (batch size, world size) of the profile trained with one rank
    on each of the first world-size nodes (as the ranks' hostnames tell) and
    reported images/sec."""
    names, wrong = cluster.contract.node_names, []
    for r in scaling_runs:
        w, distinct = r["world_size"], len(set(r["hosts"]))
        if distinct != w:
            wrong.append(f"batch {r['batch_size']} np={w}: {w} ranks reported {distinct} host"
                         f"{'s' if distinct != 1 else ''} ({r['hosts']}) on {','.join(f'{n}:1' for n in names[:w])}: "
                         "two ranks on one node, or nodes that share a hostname")
        if r["images_per_sec"] <= 0:
            wrong.append(f"batch {r['batch_size']} np={w}: {r['images_per_sec']} images/sec")
    assert {(r["batch_size"], r["world_size"]) for r in scaling_runs} == set(profile.scaling_points())
    assert not wrong, "; ".join(wrong)
