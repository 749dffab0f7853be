"""Exposure probes on a guests-mode all-in-one's external network: the
OpenStack side of the exposure survey (refarch.clouds.exposure holds the
scan itself, shared with the local cloud).

Each probe is a network namespace of this host with a macvlan child of the
host's end of the all-in-one's external link (refarch.clouds.aio.network),
so its packets reach the guests only as any host on the external network
would: through the floating IPs, and through the run's router to the
nodes' fixed addresses (a route to the cluster subnet via the router's
external gateway).  ``admin`` holds the external subnet's third address,
inside the run's admin range (:func:`admin_cidr`, the host's address and
this one); ``outside`` holds the fourth, in neither.  Both are below the
floating IP pool (refarch.clouds.aio starts it at the tenth address).

The evidence that makes a verdict of a scan, as on the local cloud:
- reached: nftables counters in the probe's namespace, per node, on every
  packet it sent towards one of the node's addresses;
- arrived: nftables counters in the all-in-one's namespace, in the bridge
  family after br_netfilter (where the Linux bridge agent's iptables
  enforce the security groups), on packets leaving a bridge by the node's
  tap device: what the security group let through to the guest.
"""

from __future__ import annotations

import ipaddress
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ... import proc
from .. import exposure
from ..arrivals import read_counters

#: Offsets in the external subnet: .1 the gateway nobody holds, .2 the host.
PROBE_OFFSETS = {"admin": 3, "outside": 4}
#: nftables table of the counters, in each probe's namespace and (suffixed by
#: the run id) in the all-in-one's.
TABLE = "refarch_probe"


@dataclass(frozen=True)
class Target:
    """A node as a probe reaches it: its fixed ``address``, its floating IP
    (None without one) and the tap device of its port on the all-in-one."""

    name: str
    address: str
    floating: str | None
    tap: str

    @property
    def addresses(self) -> list[str]:
        return [self.address] + ([self.floating] if self.floating else [])


def admin_cidr(external: str) -> str:
    """The admin range a run on the all-in-one gets: the host's address and
    the admin probe's, as a /31 (``external``: the external subnet)."""
    return f"{ipaddress.ip_network(external).network_address + 2}/31"


def tap_name(port_id: str) -> str:
    """The Linux bridge agent's tap device of a Neutron port: ``tap`` and
    the port id's first 11 characters."""
    return f"tap{port_id[:11]}"


def plan(run_id: str, external: str, router_gateway: str) -> list[exposure.Probe]:
    """The probes of ``run_id`` on the external subnet ``external``;
    ``gateway`` is the run router's external address, through which each
    probe routes to the cluster subnet."""
    net = ipaddress.ip_network(external)
    return [exposure.Probe(kind, exposure.netns_name(run_id, kind), exposure.host_if_name(run_id, kind),
                           str(net.network_address + PROBE_OFFSETS[kind]), router_gateway, str(net))
            for kind in exposure.PROBE_KINDS]


def create(probe: exposure.Probe, parent: str, cluster_cidr: str) -> None:
    """Make the probe's namespace, its macvlan child of ``parent`` (the
    host's end of the external link) and a route to ``cluster_cidr`` via
    the router.

    Raises:
        CommandError: an ``ip`` command failed (e.g. the name exists).
    """
    prefix = ipaddress.ip_network(probe.cidr).prefixlen
    ns = probe.netns
    for cmd in (["ip", "netns", "add", ns],
                ["ip", "link", "add", "link", parent, "name", probe.host_if, "type", "macvlan", "mode", "bridge"],
                ["ip", "link", "set", probe.host_if, "netns", ns],
                ["ip", "-n", ns, "link", "set", probe.host_if, "name", "eth0"],
                ["ip", "-n", ns, "addr", "add", f"{probe.address}/{prefix}", "dev", "eth0"],
                ["ip", "-n", ns, "link", "set", "eth0", "up"],
                ["ip", "-n", ns, "link", "set", "lo", "up"],
                ["ip", "-n", ns, "route", "add", cluster_cidr, "via", probe.gateway]):
        proc.run(cmd, timeout_s=30)


def _counters(table: str, family: str, hook: str, items: list[tuple[str, str]]) -> str:
    rules = "\n".join(f'        {match} counter comment "{comment}"' for match, comment in items)
    return (f"table {family} {table} {{\n    chain {hook} {{\n        type filter hook {hook} priority 300; "
            f"policy accept;\n{rules}\n    }}\n}}\n")


def reach_ruleset(probe: exposure.Probe, targets: list[Target]) -> str:
    """nftables ruleset for the probe's namespace: a counter per node of
    the packets the probe sent to any of its addresses ("admin node1")."""
    return _counters(TABLE, "inet", "output", [
        (f"ip daddr {{ {', '.join(t.addresses)} }}", f"{probe.kind} {t.name}") for t in targets])


def arrival_ruleset(table: str, probes: list[exposure.Probe], targets: list[Target],
                    listening: dict[str, list[str]]) -> str:
    """nftables ruleset for the all-in-one's namespace: in the bridge
    family's forward hook after br_netfilter (priority 300), per probe and
    node, the packets leaving by the node's tap ("outside node2 all") and
    those to each port the node listens on ("outside node2 udp/111");
    ``listening``: node name -> ["tcp/22", ...]."""
    items = []
    for probe in probes:
        for t in targets:
            match = f'oifname "{t.tap}" ip saddr {probe.address}'
            for port in listening.get(t.name, []):
                proto, number = port.split("/")
                items.append((f"{match} {proto} dport {number}", f"{probe.kind} {t.name} {port}"))
            items.append((match, f"{probe.kind} {t.name} all"))
    return _counters(table, "bridge", "forward", items)


def node_listeners(ssh: list[str], user: str, address: str) -> list[str]:
    """The ports a node listens on beyond loopback ("tcp/22"), from ``ss``
    over SSH (``ssh``: the run's SSH options).

    Raises:
        CommandError, PhaseTimeout: SSH or ss failed.
    """
    out = proc.run(["ssh", *ssh, f"{user}@{address}", "ss -Htuln"], timeout_s=60).stdout
    return exposure.parse_listeners(out)


def survey(run_id: str, aio_container: str, parent: str, probes: list[exposure.Probe], targets: list[Target],
           cluster_cidr: str, ssh: list[str], user: str) -> dict[str, exposure.ScanResult]:
    """Scan every address of every node from each probe (made here on
    ``parent``, removed whatever happens), all probes at once, and count
    what reached each node and what the security group let through.
    Results are keyed by the nodes' fixed addresses, as the contract names
    them, whichever address a port was found open on.

    Raises:
        ValueError: a target is not one of the run's nodes.
        CommandError, PhaseTimeout: ip, nmap, nft or SSH failed.
    """
    owner = {a: t.address for t in targets for a in t.addresses}
    every_address = sorted(owner)
    exposure.check_targets(every_address, list(owner))
    listening = {t.name: node_listeners(ssh, user, t.address) for t in targets}
    every = sorted({p for ports in listening.values() for p in ports}, key=exposure.port_key)
    udp_ports = sorted({int(p.split("/")[1]) for p in every if p.startswith("udp/")} | set(exposure.top_udp_ports()))
    arrivals = f"{TABLE}_{run_id.rsplit('-', 1)[-1]}"
    exposure.remove_probes(run_id)  # what an interrupted survey of this run left
    try:
        for probe in probes:
            create(probe, parent, cluster_cidr)
            proc.run(["ip", "netns", "exec", probe.netns, "nft", "-f", "-"], timeout_s=30,
                     input_text=reach_ruleset(probe, targets))
        proc.in_netns(aio_container, "nft", "-f", "-", input_text=arrival_ruleset(arrivals, probes, targets, listening))
        with ThreadPoolExecutor(max_workers=len(probes)) as pool:
            futures = {p.kind: pool.submit(exposure.scan, p, every_address, udp_ports=udp_ports, listening=every)
                       for p in probes}
            raw = {kind: future.result() for kind, future in futures.items()}
        inside = read_counters(proc.in_netns(aio_container, "nft", "-j", "list", "table", "bridge", arrivals).stdout)
        scans = {}
        for probe in probes:
            at_edge = read_counters(proc.run(["ip", "netns", "exec", probe.netns, "nft", "-j", "list", "table",
                                              "inet", TABLE], timeout_s=30).stdout)
            scans[probe.kind] = by_node(raw[probe.kind], targets, listening, at_edge, inside)
        return scans
    finally:
        proc.in_netns(aio_container, "nft", "delete", "table", "bridge", arrivals, check=False)
        exposure.remove_probes(run_id)


def by_node(scan: exposure.ScanResult, targets: list[Target], listening: dict[str, list[str]],
            at_edge: dict[str, int], inside: dict[str, int]) -> exposure.ScanResult:
    """One probe's scan keyed by the nodes' fixed addresses: the ports and
    sshd methods found on any of a node's addresses, its reached and
    arrived counters, the listening ports its packets arrived at (open
    whether or not the service answered) and what the security group
    dropped (reached - arrived, over all nodes)."""
    kind = scan.probe.kind
    out = exposure.ScanResult(scan.probe, seconds=scan.seconds, udp_ports=scan.udp_ports)
    for t in targets:
        out.open_ports[t.address] = []
        for a in t.addresses:
            out.merge_open(t.address, scan.open_ports.get(a, []))
            if a in scan.ssh_methods:
                out.ssh_methods[t.address] = scan.ssh_methods[a]
        out.reached[t.address] = at_edge.get(f"{kind} {t.name}", 0)
        out.arrived[t.address] = inside.get(f"{kind} {t.name} all", 0)
        found = [p for p in listening.get(t.name, []) if inside.get(f"{kind} {t.name} {p}", 0) > 0]
        out.open_by_arrival[t.address] = found
        out.merge_open(t.address, found)
    out.dropped = sum(out.reached[t.address] - out.arrived[t.address] for t in targets)
    return out

