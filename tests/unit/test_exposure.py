"""Exposure probes offline: nmap XML recorded from the probes of a real
local run (policy on; a listener admitted by a rogue rule; sshd offering
passwords after F6), the probe layout, and the exposure properties fed
those scans."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from refarch import exposure, localcloud
from refarch.exposure import Probe
from refarch.profile import load_profile
from refarch.results import Results
from tests.integration import test_properties

DATA = Path(__file__).parent / "data" / "exposure"
NAMES = {"10.213.0.10": "node1", "10.213.0.11": "node2"}
ADMIN = Probe("admin", "r-probe-admin", "rfpxngjnla", "10.213.1.2", "10.213.1.1", "10.213.1.0/25")
OUTSIDE = Probe("outside", "r-probe-outside", "rfpxngjnlo", "10.213.1.130", "10.213.1.129", "10.213.1.128/25")


def _scan(name, probe, dropped=262144):
    result = exposure.parse_scan((DATA / name).read_text(encoding="utf-8"), probe)
    result.dropped = dropped
    return result


def test_a_run_block_splits_into_cluster_and_probe_subnets():
    assert localcloud.split_block("10.213.0.0/23") == ("10.213.0.0/24", "10.213.1.0/24")
    assert localcloud.probe_ranges("10.213.1.0/24") == {"admin": "10.213.1.0/25", "outside": "10.213.1.128/25"}


def test_probe_plan_names_and_addresses():
    admin, outside = exposure.plan_probes("hvd-root-xngjnl", localcloud.probe_ranges("10.213.1.0/24"))
    assert (admin.netns, admin.gateway, admin.address) == ("hvd-root-xngjnl-probe-admin", "10.213.1.1", "10.213.1.2")
    assert outside.address == "10.213.1.130" and outside.cidr == "10.213.1.128/25"
    assert len(admin.host_if) <= 15 and admin.host_if != outside.host_if


def test_nmap_scans_every_tcp_port_and_ntp_from_inside_the_probe():
    cmd = exposure.nmap_command(ADMIN, ["10.213.0.10"])
    assert cmd[:4] == ["ip", "netns", "exec", "r-probe-admin"]
    assert "-sT" in cmd and "T:1-65535,U:123" in cmd and "ssh-auth-methods" in cmd


def test_policy_on_admin_sees_only_sshd_with_publickey():
    scan = _scan("admin.xml", ADMIN)
    assert scan.open_ports == {"10.213.0.10": ["tcp/22"], "10.213.0.11": ["tcp/22"]}
    assert scan.ssh_methods == {"10.213.0.10": ["publickey"], "10.213.0.11": ["publickey"]}
    assert exposure.unexpected(scan, ["tcp/22"], NAMES) == []
    assert exposure.unexpected(scan, [], NAMES) == ["node1 10.213.0.10 tcp/22", "node2 10.213.0.11 tcp/22"]


def test_policy_on_outside_sees_nothing():
    scan = _scan("outside.xml", OUTSIDE)
    assert scan.open_ports == {"10.213.0.10": [], "10.213.0.11": []}


def test_sshd_offering_passwords_is_named():
    scan = _scan("admin-password-node2.xml", ADMIN)
    assert exposure.password_offered(scan, NAMES) == ["node2 (password)"]


# The exposure properties fed the recorded scans -------------------------------------
CLUSTER = SimpleNamespace(contract=SimpleNamespace(
    node_names=list(NAMES.values()),
    nodes=[SimpleNamespace(name=n, address=a) for a, n in NAMES.items()]))


def _judge(prop_id, scans):
    values = {"cluster": CLUSTER, "profile": load_profile("local"), "exposure_scans": scans}
    request = SimpleNamespace(getfixturevalue=lambda name: values[name])
    results = Results("hvd-unit-000000", "local", "local")
    try:
        test_properties.test_property(prop_id, request, values["profile"], results,
                                      SimpleNamespace(run_id="hvd-unit-000000"))
    finally:
        recorded = results.properties[-1] if results.properties else None
    return recorded


@pytest.mark.parametrize("prop_id", ["exposure.outside_open_ports", "exposure.admin_unexpected_ports",
                                     "exposure.password_auth_nodes"])
def test_recorded_scans_pass(prop_id):
    scans = {"admin": _scan("admin.xml", ADMIN), "outside": _scan("outside.xml", OUTSIDE)}
    assert _judge(prop_id, scans)["verdict"] == "pass"


def test_a_port_admitted_from_anywhere_fails_naming_node_port_and_probe():
    scans = {"admin": _scan("admin.xml", ADMIN), "outside": _scan("outside-exposed-8099.xml", OUTSIDE)}
    with pytest.raises(AssertionError, match=r"exposure.outside_open_ports = 1 ports \(outside probe 10\.213\.1\.130: "
                                             r"node2 10\.213\.0\.11 tcp/8099 open\) is above the upper bound 0"):
        _judge("exposure.outside_open_ports", scans)


def test_password_login_offered_fails():
    scans = {"admin": _scan("admin-password-node2.xml", ADMIN), "outside": _scan("outside.xml", OUTSIDE)}
    with pytest.raises(AssertionError, match=r"exposure.password_auth_nodes = 1 nodes \(node2 \(password\) offered"):
        _judge("exposure.password_auth_nodes", scans)


def test_a_scan_whose_packets_never_reached_the_policy_proves_nothing():
    scans = {"admin": _scan("admin.xml", ADMIN), "outside": _scan("outside.xml", OUTSIDE, dropped=0)}
    with pytest.raises(pytest.fail.Exception, match="dropped nothing: its packets never reached the cluster"):
        _judge("exposure.outside_open_ports", scans)


def test_an_admin_probe_that_cannot_reach_sshd_proves_nothing():
    scans = {"admin": _scan("outside.xml", ADMIN), "outside": _scan("outside.xml", OUTSIDE)}
    with pytest.raises(pytest.fail.Exception, match=r"cannot reach sshd on node1, node2"):
        _judge("exposure.admin_unexpected_ports", scans)
