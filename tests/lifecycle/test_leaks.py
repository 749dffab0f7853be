"""The leak check finds a run's resources by name as well as by label
(F17): a volume named with the run's id prefix whose label was
lost is reported, and the sweep removes it.  A run whose ``terraform
destroy`` fails is a failed run, even when the sweep then removes
everything."""

import pytest

from refarch import proc
from refarch.clouds import local as localcloud
from refarch.paths import ROOT
from refarch.run import new_run_id

from .suite import assert_nothing_left, configuring, start_suite, wait_for

pytestmark = pytest.mark.integration


def test_an_unlabelled_volume_of_the_run_is_a_leak_and_is_swept():
    run_id = new_run_id("leak")
    name = f"{run_id}-data"
    proc.run(["podman", "volume", "create", name], timeout_s=60)
    try:
        assert localcloud.leaks(run_id) == {"volumes": [name]}
        swept = localcloud.sweep(run_id)
        assert swept["volumes"] == [name]
        assert localcloud.leaks(run_id) == {}
    finally:
        proc.run(["podman", "volume", "rm", "-f", name], timeout_s=60, check=False)


def test_another_runs_resources_are_not_matched_by_a_shorter_prefix():
    run_id = new_run_id("leak")
    other = f"{run_id}x-data"  # a run id that merely starts like ours
    proc.run(["podman", "volume", "create", other], timeout_s=60)
    try:
        assert localcloud.leaks(run_id) == {}
    finally:
        proc.run(["podman", "volume", "rm", "-f", other], timeout_s=60, check=False)


def test_a_run_whose_id_extends_ours_is_not_ours():
    run_id = new_run_id("leak")
    other = f"{run_id}-x-net"  # the network of run "<run_id>-x"
    proc.run(["podman", "volume", "create", other], timeout_s=60)
    try:
        assert localcloud.leaks(run_id) == {}
    finally:
        proc.run(["podman", "volume", "rm", "-f", other], timeout_s=60, check=False)


def test_a_killed_runs_policy_table_and_probe_namespaces_are_leaks_and_are_swept():
    """A run killed before terraform destroy (or during its exposure scan)
    leaves its nftables policy table and probe namespaces: both are found
    by the run id and removed by the sweep."""
    from refarch.clouds import exposure

    run_id = new_run_id("leak")
    table = localcloud.policy_table(run_id)
    probe = exposure.plan_probes(run_id, localcloud.probe_ranges("10.254.255.0/24"))[1]
    proc.run(["nft", "add", "table", "inet", table], timeout_s=30)
    try:
        exposure.create_probe(probe)
        assert localcloud.leaks(run_id) == {"nft_tables": [table], "netns": [probe.netns]}
        swept = localcloud.sweep(run_id)
        assert swept["nft_tables"] == [table] and swept["netns"] == [probe.netns]
        assert localcloud.leaks(run_id) == {}
        links = proc.run(["ip", "-o", "link", "show"], timeout_s=30).stdout
        assert probe.host_if not in links, "the probe's veth outlived its namespace"
    finally:
        proc.run(["nft", "delete", "table", "inet", table], timeout_s=30, check=False)
        exposure.remove_probes(run_id)


def test_a_failed_terraform_destroy_fails_the_run_and_leaves_nothing(run_state):
    """A container the descriptors do not know about stays attached to the
    run's network (as a leftover port keeps an OpenStack security group in
    use): ``terraform destroy`` fails on the network.  The run fails on its
    teardown check quoting Terraform's error, and the sweep by run id still
    removes everything."""
    child = start_suite([str(ROOT / "tests/integration/test_nodes.py"), "-k", "sshd",
                         "--profile", run_state.profile_name, "--set", "nodes.count=1"])
    stray = f"{child.run_id}-stray"
    try:
        wait_for(lambda: configuring(child), 900, "the Ansible phase", child)
        network = localcloud.run_resources(child.run_id)["networks"][0]
        image = proc.run(["podman", "inspect", "--format", "{{.ImageName}}", f"{child.run_id}-node1"],
                         timeout_s=60).stdout.strip()
        proc.run(["podman", "create", "--name", stray, "--network", network, image, "true"], timeout_s=60)
        out = child.finish(900)
    finally:
        if child.process.poll() is None:
            child.process.terminate()
            child.finish(600)
        proc.run(["podman", "rm", "-f", stray], timeout_s=60, check=False)
    assert child.process.returncode != 0, out[-3000:]
    assert f"teardown of run {child.run_id} FAILED" in out and "terraform destroy failed" in out, out[-3000:]
    checks = {c["id"]: c for c in child.results["checks"]}
    teardown = checks.get("refarch::teardown")
    assert teardown and teardown["outcome"] == "failed", checks.keys()
    assert "podman network rm" in teardown["message"] and "nothing is left" in teardown["message"], teardown
    assert any("teardown" in name and "terraform destroy failed" in message
               for name, message in child.junit_errors().items()), child.junit_errors()
    # The checks themselves passed: the teardown alone failed the run.
    assert all(c["outcome"] in ("passed", "skipped") for i, c in checks.items() if i != "refarch::teardown")
    assert_nothing_left(child)
