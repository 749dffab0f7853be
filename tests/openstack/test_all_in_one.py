"""The OpenStack target against a real OpenStack: the all-in-one the suite
starts (refarch/clouds/aio), profile ``openstack-aio``.

The real module is applied with the real provider; what it made is read
back through openstacksdk and compared with the plan; the node checks cannot
run on Nova's fake servers (no guest OS), and the run says so once.  Then
the parts of the OpenStack driver that met only openstacksdk's fakes before:
the quota preflight, destroy and the leak check, the janitor after a run
killed with SIGKILL, the node operations against Nova's real state
transitions.  At the end the all-in-one is stopped and nothing of it is
left.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time

import pytest

from refarch.clouds import aio as aio_mod
from refarch.clouds import openstack as ostk
from refarch.cluster import Cluster
from refarch.errors import PreflightError
from refarch.profile import load_profile
from refarch.pytest.state import say

PROFILE = "openstack-aio"
NO_NODE_CHECKS = ("node checks: not run on openstack-aio: Nova's fake driver makes servers without a guest OS "
                  "(nothing to SSH into); they run on the local cloud (tox -e integration) and on a real cloud")


#: Seconds of each part, said at the end of the run; the host's listening
#: sockets before the all-in-one started.
TIMINGS: dict[str, float | None] = {}
LISTENING_BEFORE: set[str] = set()


def _listening() -> set[str]:
    out = subprocess.run(["ss", "-Htln"], capture_output=True, text=True, check=True).stdout
    return {line.split()[3] for line in out.splitlines() if len(line.split()) > 3}


@pytest.fixture(scope="module")
def aio(request):
    """A started all-in-one; its clouds.yaml is the one openstacksdk and
    Terraform's provider read for this module's tests."""
    before = _listening()
    started = time.monotonic()
    a = aio_mod.start(load_profile(PROFILE))
    os.environ["OS_CLIENT_CONFIG_FILE"] = str(a.clouds_yaml)
    TIMINGS.update(start_s=round(time.monotonic() - started, 1), ready_s=a.ready_s)
    LISTENING_BEFORE.update(before)
    yield a
    os.environ.pop("OS_CLIENT_CONFIG_FILE", None)
    aio_mod.stop(a)


def _say(request, line: str) -> None:
    say(request.config, f"openstack-aio: {line}")


def _conn(cloud: str = "aio-demo"):
    return ostk.connect(cloud)


def test_a_quota_below_the_need_stops_the_run_before_anything_is_made(aio):
    admin, conn = _conn(aio_mod.ADMIN_CLOUD), _conn()
    project = conn.current_project_id
    before = ostk.baseline(conn)
    admin.set_compute_quotas(project, instances=1)
    try:
        cluster = Cluster.create(PROFILE)
        with pytest.raises(PreflightError, match=r"^quota too small for this cluster: instances: need 2, 1 of 1 free$"):
            cluster.prepare()
        assert not (cluster.rundir.terraform_dir / "terraform.tfstate").exists()
        assert ostk.leaks(conn, before) == {}
    finally:
        admin.set_compute_quotas(project, instances=10)


def test_the_module_applies_with_the_real_provider_as_planned(aio, request):
    profile = load_profile(PROFILE)
    cluster = Cluster.create(PROFILE)
    conn = _conn()
    try:
        contract = cluster.deploy()
        run = cluster.run_id
        servers = {s.name: conn.compute.get_server(s.id) for s in conn.compute.servers() if s.name.startswith(run)}
        assert sorted(servers) == [f"{run}-node{i + 1}" for i in range(profile.nodes.count)]
        image = conn.image.find_image(profile.openstack.image_name, ignore_missing=False)
        group = conn.network.find_security_group(f"{run}-cluster", ignore_missing=False)
        for node in contract.nodes:
            server = servers[f"{run}-{node.name}"]
            assert server.status == "ACTIVE", f"{server.name}: {server.status}"
            assert server.flavor["original_name"] == profile.openstack.flavor_name and server.image["id"] == image.id
            port = conn.network.find_port(f"{run}-{node.name}", ignore_missing=False)
            assert port.device_id == server.id and [ip["ip_address"] for ip in port.fixed_ips] == [node.address]
            assert port.security_group_ids == [group.id], f"{port.name}: groups {port.security_group_ids}"
        node1_port = conn.network.find_port(f"{run}-node1", ignore_missing=False)
        fips = [ip for ip in conn.network.ips() if ip.port_id == node1_port.id]
        assert len(fips) == 1 and fips[0].fixed_ip_address == contract.nodes[0].address
        rules = {(r.direction, r.ether_type, r.protocol, r.port_range_min, r.port_range_max, r.remote_ip_prefix,
                  r.remote_group_id) for r in conn.network.security_group_rules(security_group_id=group.id)}
        assert rules == {
            ("egress", "IPv4", None, None, None, None, None), ("egress", "IPv6", None, None, None, None, None),
            ("ingress", "IPv4", "tcp", 22, 22, profile.openstack.admin_cidr, None),
            *{("ingress", "IPv4", proto, None, None, None, group.id) for proto in ("tcp", "udp", "icmp")},
        }, rules
        known = open(contract.ssh_known_hosts_file, encoding="utf-8").read()
        assert f"{fips[0].floating_ip_address} ssh-ed25519 " in known
        _say(request, NO_NODE_CHECKS)
    finally:
        report = cluster.destroy()
        TIMINGS.update(deploy_s=cluster.phases().get("deploy"), teardown_s=cluster.phases().get("teardown"))
    assert report["leaks"] == {} and report["state"] == []
    _say(request, f"apply and destroy of the real module: {TIMINGS}")


def test_the_node_operations_meet_novas_state_transitions(aio):
    cluster = Cluster.create(PROFILE)
    try:
        cluster.deploy()
        driver, run = cluster.driver, cluster.context
        driver.stop_node(run, "node2")
        assert driver.node_state(run, "node2") == "stopped"
        driver.stop_node(run, "node2")  # Nova answers 409: already stopped is done
        driver.start_node(run, "node2")
        assert driver.node_state(run, "node2") == "running"
        driver.fail_node(run, "node2", "kill")  # paused: a power cut
        assert _conn().compute.find_server(f"{cluster.run_id}-node2").status == "PAUSED"
        driver.restore_node(run, "node2", "kill")
        assert driver.node_state(run, "node2") == "running"
        driver.fail_node(run, "node2", "partition")
        driver.restore_node(run, "node2", "partition")
    finally:
        report = cluster.destroy()
    assert report["leaks"] == {}


def test_the_janitor_cleans_a_run_killed_after_apply(aio, request, tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen([sys.executable, "-m", "refarch", "up", "--profile", PROFILE, "--no-configure"],
                             stdout=open(tmp_path / "up.log", "w"), stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
    conn = _conn()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and child.poll() is None:
        if any(s.status == "ACTIVE" for s in conn.compute.servers() if s.name.startswith("hvd-")):
            if any(ip.port_id for ip in conn.network.ips()):
                break
        time.sleep(2)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    run = next(s.name.rsplit("-node", 1)[0] for s in conn.compute.servers() if s.name.startswith("hvd-"))
    report = ostk.janitor(conn, run, dt.timedelta(0), dry_run=False)
    assert report.failed == [], report.failed
    assert {kind for kind, _ in report.deleted} >= {"servers", "floating_ips", "routers", "networks",
                                                     "security_groups", "keypairs"}
    assert not [r for kind, lister in ostk._listers(conn).items() for r in lister() if ostk._belongs(r, run)]
    _say(request, f"janitor after SIGKILL of {run}: " + "; ".join(report.waits))


def test_a_throwaway_project_in_a_real_keystone(aio, request):
    """project_mode throwaway: the admin makes a project for the run, the CI
    user gets its role there and makes an application credential that
    Terraform uses; at the end the project and the credential are gone."""
    cluster = Cluster.create(PROFILE, overrides={"openstack.project_mode": "throwaway",
                                                 "openstack.cloud": aio_mod.ADMIN_CLOUD})
    admin = _conn(aio_mod.ADMIN_CLOUD)
    project = None
    try:
        cluster.prepare()
        project = cluster.rundir.read_meta()["project"]
        assert admin.identity.get_project(project["id"]).name == cluster.run_id
        contract = cluster.deploy()
        servers = [s for s in admin.compute.servers(all_projects=True) if s.name.startswith(cluster.run_id)]
        assert {s.project_id for s in servers} == {project["id"]} and len(servers) == len(contract.nodes)
    finally:
        report = cluster.destroy()
    assert report["leaks"] == {}
    assert admin.identity.find_project(cluster.run_id) is None
    assert not any(c.id == project["credential_id"] for u in admin.identity.users()
                   for c in admin.identity.application_credentials(u.id)), "the application credential is left"
    _say(request, f"throwaway project {cluster.run_id}: made, used by Terraform's provider, deleted")


def test_stopping_the_all_in_one_leaves_nothing(aio, request):
    aio_mod.stop(aio)
    from refarch.clouds import local as localcloud

    found = localcloud.run_resources(aio.run_id)
    assert not found["containers"] and not found["networks"], found
    new = _listening() - LISTENING_BEFORE
    assert not new, f"listening on the host after the all-in-one stopped: {sorted(new)}"
    _say(request, f"stopped {aio.run_id}: no container, network or listening port left")
