"""Exposure probes offline: nmap XML recorded from the probes of a real
local run (policy on; a listener admitted by a rogue rule; sshd offering
passwords after F6), the probe layout, and the exposure properties fed
those scans."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from refarch.clouds import arrivals, exposure
from refarch.clouds import local as localcloud
from refarch.clouds.exposure import Probe
from refarch.judge.results import Results
from refarch.profile import load_profile
from refarch.properties import exposure as exposed
from tests.integration import test_properties

DATA = Path(__file__).parent / "data" / "exposure"
NAMES = {"10.213.0.10": "node1", "10.213.0.11": "node2"}
ADMIN = Probe("admin", "r-probe-admin", "rfpxngjnla", "10.213.1.2", "10.213.1.1", "10.213.1.0/25")
OUTSIDE = Probe("outside", "r-probe-outside", "rfpxngjnlo", "10.213.1.130", "10.213.1.129", "10.213.1.128/25")


def _scan(name, probe, dropped=262144, reached=65600):
    result = exposure.parse_scan((DATA / name).read_text(encoding="utf-8"), probe)
    result.dropped = dropped
    result.reached = {address: reached for address in NAMES}
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
    assert "T:1-65535,U:53,111,123" in exposure.nmap_command(ADMIN, ["10.213.0.10"], [123, 111, 53, 111])


def test_policy_on_admin_sees_only_sshd_with_publickey():
    scan = _scan("admin.xml", ADMIN)
    assert scan.open_ports == {"10.213.0.10": ["tcp/22"], "10.213.0.11": ["tcp/22"]}
    assert scan.ssh_methods == {"10.213.0.10": ["publickey"], "10.213.0.11": ["publickey"]}
    assert exposed.unexpected(scan, ["tcp/22"], NAMES) == []
    assert exposed.unexpected(scan, [], NAMES) == ["node1 10.213.0.10 tcp/22", "node2 10.213.0.11 tcp/22"]


def test_policy_on_outside_sees_nothing():
    scan = _scan("outside.xml", OUTSIDE)
    assert scan.open_ports == {"10.213.0.10": [], "10.213.0.11": []}


def test_sshd_offering_passwords_is_named():
    scan = _scan("admin-password-node2.xml", ADMIN)
    assert exposed.password_offered(scan, NAMES) == ["node2 (password)"]


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


def test_a_scan_whose_packets_never_reached_the_cluster_proves_nothing():
    scans = {"admin": _scan("admin.xml", ADMIN), "outside": _scan("outside.xml", OUTSIDE, dropped=0, reached=0)}
    with pytest.raises(pytest.fail.Exception, match=r"none of its packets reached node1, node2: the scan proves "
                                                     r"nothing there"):
        _judge("exposure.outside_open_ports", scans)


def test_an_admin_probe_that_cannot_reach_sshd_proves_nothing():
    scans = {"admin": _scan("outside.xml", ADMIN), "outside": _scan("outside.xml", OUTSIDE)}
    with pytest.raises(pytest.fail.Exception, match=r"cannot reach sshd on node1, node2"):
        _judge("exposure.admin_unexpected_ports", scans)


# Every port a node serves: listeners, UDP, arrival counters ---------------------------
SS = """tcp   LISTEN 0      128          0.0.0.0:22         0.0.0.0:*
tcp   LISTEN 0      128             [::]:22            [::]:*
udp   UNCONN 0      0          127.0.0.1:323        0.0.0.0:*
udp   UNCONN 0      0              [::1]:323           [::]:*
udp   UNCONN 0      0            0.0.0.0:111        0.0.0.0:*
tcp   LISTEN 0      5        10.213.0.11:8099       0.0.0.0:*
udp   UNCONN 0      0                  *:5353             *:*
"""


def test_listeners_reachable_from_elsewhere_are_every_non_loopback_socket():
    assert exposure.parse_listeners(SS) == ["tcp/22", "tcp/8099", "udp/111", "udp/5353"]


def test_udp_goes_to_nmaps_most_frequent_ports(tmp_path):
    services = tmp_path / "nmap-services"
    services.write_text("# comment\nipp\t631/udp\t0.45\nhttp\t80/tcp\t0.48\nntp\t123/udp\t0.33\n"
                        "snmp\t161/udp\t0.43\n")
    assert exposure.top_udp_ports(2, services) == [631, 161]
    assert exposure.top_udp_ports(2, tmp_path / "missing") == [123]


def test_the_careful_pass_covers_the_listening_ports_with_retries():
    cmd = exposure.careful_command(OUTSIDE, ["10.213.0.11"], ["tcp/22", "udp/111", "tcp/8099"])
    assert cmd[cmd.index("-p") + 1] == "T:22,8099,U:111" and "-sU" in cmd and cmd[cmd.index("--max-retries") + 1] == "3"
    assert exposure.careful_command(OUTSIDE, ["10.213.0.11"], []) is None


def test_a_probe_refuses_any_target_but_the_runs_nodes():
    exposure.check_targets(["10.213.0.10"], list(NAMES))
    with pytest.raises(ValueError, match=r"refusing to scan 192\.0\.2\.1: not a node of this run"):
        exposure.check_targets(["10.213.0.10", "192.0.2.1"], list(NAMES))


def test_counter_rulesets_count_per_probe_port_and_destination():
    arrival = arrivals.arrival_ruleset("refarch_arrivals", [ADMIN, OUTSIDE], ["tcp/22", "udp/111"])
    assert "type filter hook input priority 300; policy accept;" in arrival
    assert 'ip saddr 10.213.1.130 udp dport 111 counter comment "outside udp/111"' in arrival
    assert 'ip saddr 10.213.1.2 counter comment "admin all"' in arrival
    edge = arrivals.edge_ruleset("refarch_x_probes", [OUTSIDE], NAMES)
    assert 'ip saddr 10.213.1.130 ip daddr 10.213.0.11 counter comment "outside node2"' in edge


def test_counters_are_read_from_nfts_json():
    text = json.dumps({"nftables": [{"metainfo": {}}, {"rule": {"comment": "outside udp/111", "expr": [
        {"match": {}}, {"counter": {"packets": 2, "bytes": 60}}]}}, {"rule": {"expr": [{"counter": {"packets": 9}}]}}]})
    assert arrivals.read_counters(text) == {"outside udp/111": 2}
    assert arrivals.exposed_by_arrival(["tcp/22", "udp/111"], {"outside udp/111": 2, "outside tcp/22": 0},
                                       "outside") == ["udp/111"]


def test_a_silent_udp_service_admitted_from_anywhere_fails_naming_node_port_and_probe():
    """rpcbind's udp/111 exposed: nmap sees "open|filtered" (no answer), but
    the outside probe's packets reached the listening socket on node2."""
    outside = _scan("outside.xml", OUTSIDE)
    outside.open_by_arrival = {"10.213.0.11": ["udp/111"]}
    outside.merge_open("10.213.0.11", ["udp/111"])
    scans = {"admin": _scan("admin.xml", ADMIN), "outside": outside}
    with pytest.raises(AssertionError, match=r"exposure.outside_open_ports = 1 ports \(outside probe 10\.213\.1\.130: "
                                             r"node2 10\.213\.0\.11 udp/111 open\) is above the upper bound 0"):
        _judge("exposure.outside_open_ports", scans)


def test_a_scan_that_never_reached_one_node_proves_nothing_there():
    outside = _scan("outside.xml", OUTSIDE)
    outside.reached["10.213.0.11"] = 0
    scans = {"admin": _scan("admin.xml", ADMIN), "outside": outside}
    with pytest.raises(pytest.fail.Exception, match=r"none of its packets reached node2: the scan proves nothing"):
        _judge("exposure.outside_open_ports", scans)
