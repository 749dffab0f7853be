"""The all-in-one's exposure probes (refarch.clouds.aio.probes) without a
cloud: where the probes stand, what their counters match (nft checks the
rulesets' syntax) and how a scan of floating and fixed addresses becomes
one result per node."""

import ipaddress
import subprocess

from refarch.clouds import exposure
from refarch.clouds.aio import probes

EXTERNAL = "10.215.1.0/24"
TARGETS = [probes.Target("node1", "10.42.0.11", "10.215.1.33", probes.tap_name("0123456789abcdef-0000")),
           probes.Target("node2", "10.42.0.12", None, probes.tap_name("fedcba9876543210-0000"))]


def test_the_admin_range_holds_the_host_and_the_admin_probe_only():
    cidr = ipaddress.ip_network(probes.admin_cidr(EXTERNAL))
    admin, outside = probes.plan("hvd-root-abc123", EXTERNAL, "10.215.1.57")
    assert str(cidr) == "10.215.1.2/31"
    assert ipaddress.ip_address(admin.address) in cidr and ipaddress.ip_address(outside.address) not in cidr
    # Below the floating IP pool, which starts at the tenth address (refarch.clouds.aio).
    assert all(int(ipaddress.ip_address(p.address)) - int(cidr.network_address) < 8 for p in (admin, outside))
    assert admin.gateway == outside.gateway == "10.215.1.57" and len(admin.host_if) <= 15


def test_the_tap_is_named_as_the_linux_bridge_agent_names_it():
    assert probes.tap_name("0123456789abcdef-0000") == "tap0123456789a"


def nft_check(ruleset: str) -> subprocess.CompletedProcess:
    """``nft -c`` of *ruleset* in a user and network namespace of its own:
    nft reads the kernel's cache even to check, which needs CAP_NET_ADMIN,
    and the unit job also runs unprivileged (the fresh machine's container)."""
    return subprocess.run(["unshare", "--user", "--map-root-user", "--net", "nft", "-c", "-f", "-"],
                          input=ruleset, text=True, capture_output=True, check=False)


def test_the_counters_match_every_address_and_the_nodes_taps():
    admin, outside = probes.plan("hvd-root-abc123", EXTERNAL, "10.215.1.57")
    reach = probes.reach_ruleset(admin, TARGETS)
    arrival = probes.arrival_ruleset("refarch_probe_abc123", [admin, outside], TARGETS,
                                     {"node1": ["tcp/22", "udp/111"], "node2": ["tcp/22"]})
    assert "ip daddr { 10.42.0.11, 10.215.1.33 }" in reach and '"admin node2"' in reach
    assert "table bridge" in arrival and 'oifname "tap0123456789a" ip saddr 10.215.1.4 udp dport 111' in arrival
    for ruleset in (reach, arrival):
        r = nft_check(ruleset)
        assert r.returncode == 0, r.stderr


def test_a_scan_of_floating_and_fixed_addresses_is_judged_per_node():
    admin = probes.plan("hvd-root-abc123", EXTERNAL, "10.215.1.57")[0]
    raw = exposure.ScanResult(admin, open_ports={"10.215.1.33": ["tcp/22"], "10.42.0.12": ["tcp/22"]},
                              ssh_methods={"10.215.1.33": ["publickey"]}, seconds=4.0, udp_ports=[123])
    at_edge = {"admin node1": 70000, "admin node2": 65000}
    inside = {"admin node1 all": 12, "admin node1 tcp/22": 3, "admin node2 all": 2, "admin node1 udp/111": 1}
    out = probes.by_node(raw, TARGETS, {"node1": ["tcp/22", "udp/111"], "node2": ["tcp/22"]}, at_edge, inside)
    assert out.open_ports == {"10.42.0.11": ["tcp/22", "udp/111"], "10.42.0.12": ["tcp/22"]}
    assert out.ssh_methods == {"10.42.0.11": ["publickey"]}
    assert out.reached == {"10.42.0.11": 70000, "10.42.0.12": 65000}
    assert out.open_by_arrival == {"10.42.0.11": ["tcp/22", "udp/111"], "10.42.0.12": []}
    assert out.dropped == 70000 - 12 + 65000 - 2


def test_a_node_the_probe_never_reached_has_no_count():
    admin = probes.plan("hvd-root-abc123", EXTERNAL, "10.215.1.57")[0]
    out = probes.by_node(exposure.ScanResult(admin), TARGETS, {}, {"admin node1": 5}, {})
    assert out.reached == {"10.42.0.11": 5, "10.42.0.12": 0}
