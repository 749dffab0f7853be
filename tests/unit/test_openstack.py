"""The OpenStack lifecycle, offline: openstacksdk's own fake proxies and
resources (openstack.test.fakes) stand in for a cloud."""

import datetime as dt
from types import SimpleNamespace

import pytest
from openstack.block_storage import block_storage_service
from openstack.block_storage.v3 import quota_set as volume_quota
from openstack.block_storage.v3 import volume as volume_mod
from openstack.compute import compute_service
from openstack.compute.v2 import keypair as keypair_mod
from openstack.compute.v2 import quota_set as compute_quota
from openstack.compute.v2 import server as server_mod
from openstack.identity import identity_service
from openstack.identity.v3 import application_credential, domain, project, role, user
from openstack.network import network_service
from openstack.network.v2 import floating_ip, network, port, quota, router, security_group, security_group_rule, subnet
from openstack.test import fakes

from refarch.clouds import openstack as ostk
from refarch.clouds import openstack_nodes as osnodes
from refarch.clouds import openstack_project as osproject
from refarch.errors import PreflightError, RefarchError

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.timezone.utc)
OLD = "2026-11-29T06:00:00Z"  # six hours before NOW
NEW = "2026-11-29T11:50:00Z"  # ten minutes before NOW


def fake_conn():
    conn = SimpleNamespace(
        compute=fakes.generate_fake_proxy(compute_service.ComputeService),
        network=fakes.generate_fake_proxy(network_service.NetworkService),
        block_storage=fakes.generate_fake_proxy(block_storage_service.BlockStorageService, "3"),
        identity=fakes.generate_fake_proxy(identity_service.IdentityService, "3"),
    )
    for proxy, lister in ((conn.compute, "servers"), (conn.compute, "keypairs"), (conn.network, "ips"),
                          (conn.network, "routers"), (conn.network, "ports"), (conn.network, "subnets"),
                          (conn.network, "networks"), (conn.network, "security_groups"),
                          (conn.block_storage, "volumes")):
        getattr(proxy, lister).side_effect = None
        getattr(proxy, lister).return_value = []
    return conn


def res(cls, **attrs):
    return fakes.generate_fake_resource(cls, **attrs)


# Quotas -------------------------------------------------------------------------
def set_quotas(conn, cores=(40, 8), floating=(2, 2), gigabytes=(2000, 1500)):
    conn.compute.get_quota_set.side_effect = None
    conn.compute.get_quota_set.return_value = res(
        compute_quota.QuotaSet, instances=10, cores=cores[0], ram=262144,
        usage={"instances": 1, "cores": cores[1], "ram": 16384})
    details = {k: {"limit": 10, "used": 0, "reserved": 0} for k in ("security_group", "network", "router", "port")}
    details["floatingip"] = {"limit": floating[0], "used": floating[1], "reserved": 0}
    conn.network.get_quota.side_effect = None
    conn.network.get_quota.return_value = quota.QuotaDetails(**details)
    conn.block_storage.get_quota_set.side_effect = None
    conn.block_storage.get_quota_set.return_value = res(
        volume_quota.QuotaSet, volumes=10, gigabytes=gigabytes[0], usage={"volumes": 2, "gigabytes": gigabytes[1]})


def test_quota_preflight_names_every_short_quota():
    conn = fake_conn()
    set_quotas(conn)
    need = ostk.Need.for_cluster(node_count=2, vcpus=16, ram_mb=65536, volume_gb=1000)
    with pytest.raises(PreflightError) as info:
        ostk.quota_preflight(conn, "p1", need)
    text = str(info.value)
    assert text == ("quota too small for this cluster: floating_ips: need 1, 0 of 2 free; "
                    "gigabytes: need 1000, 500 of 2000 free")
    conn.network.get_quota.assert_called_with("p1", details=True)


def test_quota_preflight_passes_and_ignores_unlimited():
    conn = fake_conn()
    set_quotas(conn, cores=(-1, 500), floating=(5, 1), gigabytes=(-1, 0))
    ostk.quota_preflight(conn, "p1", ostk.Need.for_cluster(2, 16, 65536, 1000))
    assert ostk.collect_quotas(conn, "p1")["cores"] == (-1, 500)


# Baseline and leaks -------------------------------------------------------------
def test_leak_check_reports_only_what_is_new_since_the_baseline():
    conn = fake_conn()
    old_server = res(server_mod.Server, name="someone-elses-vm")
    conn.compute.servers.return_value = [old_server]
    conn.network.ips.return_value = []
    before = ostk.baseline(conn)
    # FloatingIP.name is its address (openstacksdk aliases the two).
    leaked_fip = res(floating_ip.FloatingIP, name="203.0.113.7")
    leaked_vol = res(volume_mod.Volume, name="hvd-ci-abc123-shared")
    conn.network.ips.return_value = [leaked_fip]
    conn.block_storage.volumes.return_value = [leaked_vol]
    found = ostk.leaks(conn, before)
    assert found == {"floating_ips": [f"203.0.113.7 ({leaked_fip.id})"],
                     "volumes": [f"hvd-ci-abc123-shared ({leaked_vol.id})"]}


# Janitor ------------------------------------------------------------------------
def populate_run(conn, run="hvd-ci-abc123", created=OLD):
    tags = ["refarch", f"refarch-run:{run}"]
    items = {
        "server": res(server_mod.Server, name=f"{run}-node1", created_at=created),
        "fip": res(floating_ip.FloatingIP, description=f"SSH bastion of {run}", tags=tags,
                   created_at=created, floating_ip_address="203.0.113.9"),
        "router": res(router.Router, name=f"{run}-router", created_at=created),
        "port": res(port.Port, name=f"{run}-node1", created_at=created, device_owner=""),
        "server_port": res(port.Port, name="", created_at=created, device_owner="compute:nova", tags=tags),
        "subnet": res(subnet.Subnet, name=f"{run}-subnet", created_at=created),
        "net": res(network.Network, name=f"{run}-net", created_at=created),
        "sg": res(security_group.SecurityGroup, name=f"{run}-cluster", created_at=created),
        "vol": res(volume_mod.Volume, name=f"{run}-shared", created_at=created),
        "key": res(keypair_mod.Keypair, name=f"{run}-admin", created_at=None),
    }
    conn.compute.servers.return_value = [items["server"], res(server_mod.Server, name="prod-db", created_at=OLD)]
    conn.network.ips.return_value = [items["fip"]]
    conn.network.routers.return_value = [items["router"]]
    conn.network.ports.side_effect = lambda **kw: [] if kw else [items["port"], items["server_port"]]
    conn.network.subnets.return_value = [items["subnet"]]
    conn.network.networks.return_value = [items["net"], res(network.Network, name="public", created_at=OLD)]
    conn.network.security_groups.return_value = [items["sg"]]
    conn.block_storage.volumes.return_value = [items["vol"]]
    conn.compute.keypairs.return_value = [items["key"]]
    return items


def test_janitor_dry_run_lists_in_dependency_order_and_deletes_nothing():
    conn = fake_conn()
    populate_run(conn)
    report = ostk.janitor(conn, "hvd-ci-", dt.timedelta(hours=2), now=NOW)
    kinds = [kind for kind, _ in report.selected]
    assert kinds == ["servers", "floating_ips", "routers", "ports", "subnets", "networks",
                     "security_groups", "volumes", "keypairs"]
    assert not any("prod-db" in name or "public" in name for _, name in report.selected)
    assert report.deleted == [] and report.failed == []
    conn.compute.delete_server.assert_not_called()


def test_janitor_spares_young_runs():
    conn = fake_conn()
    populate_run(conn, created=NEW)
    report = ostk.janitor(conn, "hvd-ci-", dt.timedelta(hours=2), now=NOW)
    assert [k for k, _ in report.selected] == ["keypairs"]  # no creation time: taken as old


def test_janitor_deletes_in_order_and_retries_a_failed_delete_once():
    conn = fake_conn()
    items = populate_run(conn)
    calls = []
    conn.compute.delete_server.side_effect = lambda r, **kw: calls.append(("server", r.name))
    conn.network.delete_network.side_effect = lambda r, **kw: calls.append(("network", r.name))
    failures = iter([RuntimeError("409 Conflict: volume is attached")])

    def delete_volume(r, **kw):
        exc = next(failures, None)
        if exc:
            raise exc
        calls.append(("volume", r.name))

    conn.block_storage.delete_volume.side_effect = delete_volume
    report = ostk.janitor(conn, "hvd-ci-", dt.timedelta(hours=2), dry_run=False, now=NOW)
    assert calls == [("server", items["server"].name), ("network", items["net"].name),
                     ("volume", items["vol"].name)]
    assert report.failed == []
    assert ("volumes", f"{items['vol'].name} ({items['vol'].id})") in report.deleted


def test_janitor_reports_a_resource_that_keeps_failing():
    conn = fake_conn()
    populate_run(conn)
    conn.block_storage.delete_volume.side_effect = RuntimeError("409 Conflict: volume is attached")
    report = ostk.janitor(conn, "hvd-ci-", dt.timedelta(hours=2), dry_run=False, now=NOW)
    assert [(k, why) for k, _, why in report.failed] == [("volumes", "409 Conflict: volume is attached")]
    assert conn.block_storage.delete_volume.call_count == 2


# Throwaway project ----------------------------------------------------------------
def test_throwaway_project_lifecycle(tmp_path):
    admin = fake_conn()
    dom = res(domain.Domain, name="Default")
    proj = res(project.Project, name="hvd-ci-abc123")
    ci_user = res(user.User, name="ci-bot")
    member = res(role.Role, name="member")
    admin.identity.find_domain.side_effect = None
    admin.identity.find_domain.return_value = dom
    admin.identity.create_project.side_effect = None
    admin.identity.create_project.return_value = proj
    admin.identity.find_user.side_effect = None
    admin.identity.find_user.return_value = ci_user
    admin.identity.find_role.side_effect = None
    admin.identity.find_role.return_value = member
    user_conn = fake_conn()
    cred = res(application_credential.ApplicationCredential, secret="s3cr3t")
    user_conn.identity.create_application_credential.side_effect = None
    user_conn.identity.create_application_credential.return_value = cred
    scoped = []

    tp = osproject.ThrowawayProject.create(admin, lambda pid: scoped.append(pid) or user_conn, "hvd-ci-abc123",
                                      "Default", "ci-bot", "member", tmp_path, "https://keystone.example:5000/v3")
    assert scoped == [proj.id] and tp.project_id == proj.id
    admin.identity.assign_project_role_to_user.assert_called_once_with(proj, ci_user, member)
    assert oct(tp.clouds_yaml.stat().st_mode & 0o777) == "0o600"
    text = tp.clouds_yaml.read_text()
    assert "v3applicationcredential" in text and cred.id in text and "s3cr3t" in text

    user_conn.project_cleanup = lambda **kw: kw["status_queue"].put(res(server_mod.Server, name="left-vm"))
    user_conn.current_user_id = ci_user.id
    removed = tp.delete(admin, user_conn)
    assert removed and removed[0].startswith("Server left-vm")
    admin.identity.delete_project.assert_called_once_with(proj.id, ignore_missing=True)
    assert not tp.clouds_yaml.exists()


def test_throwaway_project_with_unknown_user_is_rolled_back(tmp_path):
    admin = fake_conn()
    admin.identity.find_user.side_effect = None
    admin.identity.find_user.return_value = None
    with pytest.raises(RefarchError, match="unknown user ci-bot"):
        osproject.ThrowawayProject.create(admin, lambda pid: None, "hvd-ci-abc123", "Default", "ci-bot", "member",
                                     tmp_path, "https://keystone.example:5000/v3")
    admin.identity.delete_project.assert_called_once()


# Connection preflight -----------------------------------------------------------
def test_missing_clouds_yaml_entry_is_one_line(tmp_path, monkeypatch):
    empty = tmp_path / "clouds.yaml"
    empty.write_text("clouds: {}\n")
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(empty))
    for var in ("OS_AUTH_URL", "OS_CLOUD", "OS_USERNAME", "OS_PASSWORD"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(PreflightError) as info:
        ostk.connect("refarch-ci", str(empty))
    assert "refarch-ci" in str(info.value) and "\n" not in str(info.value)


def test_unreachable_endpoint_is_one_line(tmp_path, monkeypatch):
    cfg = tmp_path / "clouds.yaml"
    cfg.write_text("clouds:\n  dead:\n    auth:\n      auth_url: http://127.0.0.1:9/v3\n"
                   "      username: u\n      password: p\n      project_name: p\n"
                   "      user_domain_name: Default\n      project_domain_name: Default\n")
    with pytest.raises(PreflightError, match="cloud dead: endpoint unreachable"):
        ostk.connect("dead", str(cfg))


def test_janitor_command_dry_run_prints_deletion_order(monkeypatch, capsys):
    from refarch import cli

    conn = fake_conn()
    populate_run(conn, created="2000-01-01T00:00:00Z")
    monkeypatch.setattr(ostk, "connect", lambda cloud, config_file=None: conn)
    assert cli.main(["janitor", "--cloud", "ci", "--prefix", "hvd-ci-", "--older-than", "6h"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[2] for line in lines] == ["servers", "floating_ips", "routers", "ports", "subnets",
                                                  "networks", "security_groups", "volumes", "keypairs"]
    assert all(line.startswith("would delete") for line in lines)
    conn.compute.delete_server.assert_not_called()


def test_janitor_command_rejects_a_malformed_age(capsys):
    from refarch import cli

    assert cli.main(["janitor", "--cloud", "ci", "--older-than", "six hours"]) == 2
    assert "malformed age 'six hours'" in capsys.readouterr().err


# Stopping and starting a node (availability, restart) ----------------------------
def test_stop_and_start_a_node_wait_for_the_state():
    conn = fake_conn()
    server = res(server_mod.Server, name="hvd-ci-abcdef-node2", status="ACTIVE")
    conn.compute.find_server.side_effect = None
    conn.compute.find_server.return_value = server
    osnodes.set_power(conn, "hvd-ci-abcdef-node2", on=False)
    conn.compute.stop_server.assert_called_once_with(server)
    assert conn.compute.wait_for_server.call_args.kwargs["status"] == "SHUTOFF"
    osnodes.set_power(conn, "hvd-ci-abcdef-node2", on=True)
    conn.compute.start_server.assert_called_once_with(server)
    assert conn.compute.wait_for_server.call_args.kwargs["status"] == "ACTIVE"


def test_a_node_that_does_not_come_back_is_named():
    from openstack import exceptions

    conn = fake_conn()
    conn.compute.find_server.side_effect = None
    conn.compute.find_server.return_value = res(server_mod.Server, name="hvd-ci-abcdef-node2", status="SHUTOFF")
    conn.compute.wait_for_server.side_effect = exceptions.ResourceTimeout("Timeout waiting for ACTIVE")
    with pytest.raises(RefarchError, match=r"server hvd-ci-abcdef-node2 did not become ACTIVE within 600 s"):
        osnodes.set_power(conn, "hvd-ci-abcdef-node2", on=True)
    conn.compute.find_server.return_value = None
    with pytest.raises(RefarchError, match=r"no server hvd-ci-abcdef-node9"):
        osnodes.set_power(conn, "hvd-ci-abcdef-node9", on=False)


@pytest.mark.parametrize("status, state", [("ACTIVE", "running"), ("SHUTOFF", "stopped"), ("ERROR", "error")])
def test_the_node_state_is_the_servers_status_now(status, state):
    """A stop Nova accepted can leave the server ACTIVE or in ERROR: the
    availability properties read the status again before timing anything."""
    conn = fake_conn()
    server = res(server_mod.Server, name="hvd-ci-abcdef-node2", status="ACTIVE")
    conn.compute.find_server.side_effect = None
    conn.compute.find_server.return_value = server
    conn.compute.get_server.side_effect = None
    conn.compute.get_server.return_value = res(server_mod.Server, name="hvd-ci-abcdef-node2", status=status)
    assert osnodes.node_state(conn, "hvd-ci-abcdef-node2") == state
    conn.compute.find_server.return_value = None
    assert osnodes.node_state(conn, "hvd-ci-abcdef-node2") == "missing"


# Failure modes of the availability measurements ---------------------------------
def test_a_power_cut_freezes_the_server_and_its_restore_boots_it_afresh():
    conn = fake_conn()
    server = res(server_mod.Server, name="hvd-ci-abcdef-node2", status="ACTIVE")
    conn.compute.find_server.side_effect = None
    conn.compute.find_server.return_value = server
    osnodes.power_cut(conn, "hvd-ci-abcdef-node2")
    conn.compute.pause_server.assert_called_once_with(server)
    assert conn.compute.wait_for_server.call_args.kwargs["status"] == "PAUSED"
    # After the hard reboot, the server read back: ACTIVE, no task left.
    conn.compute.get_server.side_effect = None
    conn.compute.get_server.return_value = res(server_mod.Server, name="hvd-ci-abcdef-node2", status="ACTIVE",
                                               task_state=None)
    osnodes.power_restored(conn, "hvd-ci-abcdef-node2")
    conn.compute.unpause_server.assert_called_once_with(server)
    conn.compute.reboot_server.assert_called_once_with(server, "HARD")
    assert conn.compute.wait_for_server.call_args.kwargs["status"] == "ACTIVE"
    conn.compute.get_server.side_effect = None
    conn.compute.get_server.return_value = res(server_mod.Server, name="hvd-ci-abcdef-node2", status="PAUSED")
    assert osnodes.node_state(conn, "hvd-ci-abcdef-node2") == "stopped"


def test_a_partition_gives_every_port_a_group_without_rules_and_heal_puts_the_groups_back():
    conn = fake_conn()
    server = res(server_mod.Server, id="srv-1", name="hvd-ci-abcdef-node2", status="ACTIVE")
    conn.compute.find_server.side_effect = None
    conn.compute.find_server.return_value = server
    p1 = res(port.Port, id="port-1", device_id="srv-1", security_group_ids=["sg-cluster", "sg-admin"])
    conn.network.ports.return_value = [p1]
    conn.network.find_security_group.side_effect = None
    conn.network.find_security_group.return_value = None
    isolation = res(security_group.SecurityGroup, id="sg-iso", name="hvd-ci-abcdef-partition")
    conn.network.create_security_group.side_effect = None
    conn.network.create_security_group.return_value = isolation
    egress = [res(security_group_rule.SecurityGroupRule, id=f"r{i}", direction="egress") for i in (4, 6)]
    conn.network.security_group_rules.side_effect = None
    conn.network.security_group_rules.return_value = egress
    before = osnodes.partition(conn, "hvd-ci-abcdef-node2", "hvd-ci-abcdef")
    assert before == {"port-1": ["sg-cluster", "sg-admin"]}
    assert conn.network.create_security_group.call_args.kwargs["name"] == "hvd-ci-abcdef-partition"
    assert [c.args[0] for c in conn.network.delete_security_group_rule.call_args_list] == egress
    conn.network.update_port.assert_called_once_with(p1, security_groups=["sg-iso"])
    conn.network.ports.assert_called_once_with(device_id="srv-1")
    osnodes.heal(conn, before)
    assert conn.network.update_port.call_args.args == ("port-1",)
    assert conn.network.update_port.call_args.kwargs == {"security_groups": ["sg-cluster", "sg-admin"]}


def test_a_server_without_ports_cannot_be_cut_off():
    conn = fake_conn()
    conn.compute.find_server.side_effect = None
    conn.compute.find_server.return_value = res(server_mod.Server, id="srv-1", name="hvd-ci-abcdef-node2")
    with pytest.raises(RefarchError, match="server hvd-ci-abcdef-node2 has no port to cut off"):
        osnodes.partition(conn, "hvd-ci-abcdef-node2", "hvd-ci-abcdef")


def test_janitor_waits_for_the_servers_and_retries_a_resource_still_in_use(monkeypatch):
    """A real Neutron refuses to delete a network while the deleted server's
    port is still there (409): the janitor waits for Nova's asynchronous
    delete, retries the conflict and says what it waited for."""
    from openstack import exceptions

    monkeypatch.setattr(ostk.time, "sleep", lambda s: None)
    conn = fake_conn()
    items = populate_run(conn)
    refusals = iter([exceptions.ConflictException("Unable to complete operation on network x. There are one or "
                                                  "more ports still in use on the network.")] * 2)

    def delete_network(r, **kw):
        exc = next(refusals, None)
        if exc:
            raise exc

    conn.network.delete_network.side_effect = delete_network
    report = ostk.janitor(conn, "hvd-ci-", dt.timedelta(hours=2), dry_run=False, now=NOW)
    conn.compute.wait_for_delete.assert_called_once()
    assert conn.compute.wait_for_delete.call_args.args[0] is items["server"]
    assert report.failed == [] and ("networks", f"{items['net'].name} ({items['net'].id})") in report.deleted
    assert any(w.startswith(f"networks {items['net'].name}") and "ports still in use" in w and "retried 2 times" in w
               for w in report.waits), report.waits
    assert report.waits[0].startswith("servers: 1 asynchronous deletes took")
