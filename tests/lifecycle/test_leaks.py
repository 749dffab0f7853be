"""The leak check finds a run's resources by name as well as by label
(FAULTS.md F17): a volume named with the run's id prefix whose label was
lost is reported, and the sweep removes it."""

import pytest

from refarch import localcloud, proc
from refarch.run import new_run_id

pytestmark = pytest.mark.integration


def test_an_unlabelled_volume_of_the_run_is_a_leak_and_is_swept():
    run_id = new_run_id("leak")
    name = f"{run_id}-data"
    proc.run(["podman", "volume", "create", name], timeout=60)
    try:
        assert localcloud.leaks(run_id) == {"volumes": [name]}
        swept = localcloud.sweep(run_id)
        assert swept["volumes"] == [name]
        assert localcloud.leaks(run_id) == {}
    finally:
        proc.run(["podman", "volume", "rm", "-f", name], timeout=60, check=False)


def test_another_runs_resources_are_not_matched_by_a_shorter_prefix():
    run_id = new_run_id("leak")
    other = f"{run_id}x-data"  # a run id that merely starts like ours
    proc.run(["podman", "volume", "create", other], timeout=60)
    try:
        assert localcloud.leaks(run_id) == {}
    finally:
        proc.run(["podman", "volume", "rm", "-f", other], timeout=60, check=False)


def test_a_run_whose_id_extends_ours_is_not_ours():
    run_id = new_run_id("leak")
    other = f"{run_id}-x-net"  # the network of run "<run_id>-x"
    proc.run(["podman", "volume", "create", other], timeout=60)
    try:
        assert localcloud.leaks(run_id) == {}
    finally:
        proc.run(["podman", "volume", "rm", "-f", other], timeout=60, check=False)


def test_a_killed_runs_policy_table_and_probe_namespaces_are_leaks_and_are_swept():
    """A run killed before terraform destroy (or during its exposure scan)
    leaves its nftables policy table and probe namespaces: both are found
    by the run id and removed by the sweep."""
    from refarch import exposure

    run_id = new_run_id("leak")
    table = localcloud.policy_table(run_id)
    probe = exposure.plan_probes(run_id, localcloud.probe_ranges("10.254.255.0/24"))[1]
    proc.run(["nft", "add", "table", "inet", table], timeout=30)
    try:
        exposure.create_probe(probe)
        assert localcloud.leaks(run_id) == {"nft_tables": [table], "netns": [probe.netns]}
        swept = localcloud.sweep(run_id)
        assert swept["nft_tables"] == [table] and swept["netns"] == [probe.netns]
        assert localcloud.leaks(run_id) == {}
        links = proc.run(["ip", "-o", "link", "show"], timeout=30).stdout
        assert probe.host_if not in links, "the probe's veth outlived its namespace"
    finally:
        proc.run(["nft", "delete", "table", "inet", table], timeout=30, check=False)
        exposure.remove_probes(run_id)
