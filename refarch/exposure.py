"""Network exposure, probed from outside the cluster (local cloud).

Two probes stand on networks outside the cluster, each a network namespace
of this host joined to it by a veth pair and routed (neither bridged nor
masqueraded) to the cluster's subnet, so the nodes see the probe's own
address: ``admin`` inside the run's admin range, ``outside`` in neither
the admin range nor the cluster.  From each, nmap connect-scans every TCP
port of every node, sends an NTP request to UDP 123, and asks every open
sshd which authentication methods it offers (NSE ssh-auth-methods).  The
scan's XML is parsed with python-nmap.

Names: namespaces ``<run id>-probe-admin`` / ``-probe-outside`` (found and
removed by the run's sweep like its containers).
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass, field

import nmap

from . import proc

PROBE_KINDS = ("admin", "outside")
#: sshd authentication methods that let a password guesser in.
PASSWORD_METHODS = ("password", "keyboard-interactive")


@dataclass(frozen=True)
class Probe:
    """A probe namespace: ``address`` inside it, ``gateway`` on this host's
    side of the veth (``host_if``), both in ``cidr``."""

    kind: str
    netns: str
    host_if: str
    address: str
    gateway: str
    cidr: str


@dataclass
class ScanResult:
    """What one probe saw: {node address: sorted ["tcp/22", "udp/123"]} of
    open ports, and {node address: [methods]} sshd offered."""

    probe: Probe
    open_ports: dict[str, list[str]] = field(default_factory=dict)
    ssh_methods: dict[str, list[str]] = field(default_factory=dict)
    seconds: float = 0.0
    #: Packets the run's network policy dropped while this probe scanned.
    dropped: int = 0

    def as_dict(self) -> dict:
        """What the results and the property evidence record of the scan."""
        return {"probe": self.probe.address, "range": self.probe.cidr, "open": self.open_ports,
                "ssh_methods": self.ssh_methods, "dropped": self.dropped, "seconds": self.seconds}


def netns_name(run_id: str, kind: str) -> str:
    return f"{run_id}-probe-{kind}"


def host_if_name(run_id: str, kind: str) -> str:
    """veth name on the host side (at most 15 characters): ``rfp`` + the
    run id's random suffix + the kind's initial."""
    return f"rfp{run_id.rsplit('-', 1)[-1][:10]}{kind[0]}"


def plan_probes(run_id: str, probe_ranges: dict[str, str]) -> list[Probe]:
    """The probes of ``run_id`` in ``probe_ranges`` ({"admin": cidr,
    "outside": cidr}, from :func:`refarch.localcloud.probe_ranges`): the
    first address of each range on the host side, the second in the probe."""
    probes = []
    for kind in PROBE_KINDS:
        net = ipaddress.ip_network(probe_ranges[kind])
        gateway, address = (str(a) for a in list(net.hosts())[:2])
        probes.append(Probe(kind, netns_name(run_id, kind), host_if_name(run_id, kind), address, gateway, str(net)))
    return probes


def create_probe(probe: Probe) -> None:
    """Make the probe's namespace and its routed veth pair.

    Raises:
        CommandError: an ``ip`` command failed (e.g. the name exists).
    """
    prefix = ipaddress.ip_network(probe.cidr).prefixlen
    ns = probe.netns
    for cmd in (["ip", "netns", "add", ns],
                ["ip", "link", "add", probe.host_if, "type", "veth", "peer", "name", "eth0", "netns", ns],
                ["ip", "addr", "add", f"{probe.gateway}/{prefix}", "dev", probe.host_if],
                ["ip", "link", "set", probe.host_if, "up"],
                ["ip", "-n", ns, "addr", "add", f"{probe.address}/{prefix}", "dev", "eth0"],
                ["ip", "-n", ns, "link", "set", "eth0", "up"],
                ["ip", "-n", ns, "link", "set", "lo", "up"],
                ["ip", "-n", ns, "route", "add", "default", "via", probe.gateway]):
        proc.run(cmd, timeout=30)


def run_netns(run_id: str) -> list[str]:
    """Network namespaces of ``run_id``'s probes that exist now."""
    out = proc.run(["ip", "-j", "netns", "list"], timeout=30, check=False).stdout.strip()
    names = [entry["name"] for entry in json.loads(out or "[]")]
    return [n for n in names if n in {netns_name(run_id, k) for k in PROBE_KINDS}]


def remove_probes(run_id: str) -> list[str]:
    """Delete ``run_id``'s probe namespaces; returns the names removed.  Each
    veth pair goes with its namespace (its peer end lives there); the host
    end is never deleted by name, since that name carries only the run id's
    random suffix and could be another run's."""
    gone = run_netns(run_id)
    for ns in gone:
        proc.run(["ip", "netns", "del", ns], timeout=30, check=False)
    return gone


def nmap_command(probe: Probe, addresses: list[str]) -> list[str]:
    """nmap inside the probe's namespace: TCP connect scan of ports 1-65535
    and UDP 123 (nmap sends an NTP request there), no host discovery, sshd's
    offered methods on open SSH ports; XML on stdout.  No retries, at least
    20,000 probes/s and 100 ms per answer at most: the probe is one routed
    hop from the nodes, and a dropped port must cost no waiting (measured:
    13 s per probe for 2 nodes; one retry and 8,000/s took 34-79 s)."""
    return ["ip", "netns", "exec", probe.netns, "nmap", "-n", "-Pn", "-sT", "-sU", "-p", "T:1-65535,U:123",
            "--max-retries", "0", "--min-rate", "20000", "--max-rtt-timeout", "100ms",
            "--script", "ssh-auth-methods", "-oX", "-", *addresses]


def parse_scan(xml: str, probe: Probe) -> ScanResult:
    """nmap's XML -> :class:`ScanResult` (only ports whose state is
    ``open``; UDP ``open|filtered`` means no answer came)."""
    scanner = nmap.PortScanner()
    data = scanner.analyse_nmap_xml_scan(xml)
    result = ScanResult(probe)
    for address, host in data.get("scan", {}).items():
        ports = []
        for proto in ("tcp", "udp"):
            for port, info in sorted(host.get(proto, {}).items()):
                if info.get("state") == "open":
                    ports.append(f"{proto}/{port}")
                    script = (info.get("script") or {}).get("ssh-auth-methods", "")
                    if script:
                        result.ssh_methods[address] = parse_auth_methods(script)
        result.open_ports[address] = ports
    return result


def parse_auth_methods(text: str) -> list[str]:
    """ssh-auth-methods output -> the methods offered to an unknown user
    (``publickey``, ``password``, ...)."""
    methods, section = [], False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Supported authentication methods"):
            section = True
            continue
        if section and stripped:
            methods.append(stripped)
    return methods


def scan(probe: Probe, addresses: list[str], timeout_s: int = 300) -> ScanResult:
    """Scan ``addresses`` from ``probe`` (see :func:`nmap_command`).

    Raises:
        CommandError: nmap failed; PhaseTimeout: it ran past ``timeout_s``.
    """
    import time

    start = time.monotonic()
    out = proc.run(nmap_command(probe, addresses), timeout=timeout_s).stdout
    result = parse_scan(out, probe)
    result.seconds = round(time.monotonic() - start, 1)
    return result


def drop_count(table: str) -> int:
    """Packets the run's network policy (nftables ``table``) dropped so far
    (the counters of its rules commented refarch-policy-drop)."""
    out = proc.run(["nft", "-j", "list", "table", "inet", table], timeout=30).stdout
    total = 0
    for item in json.loads(out).get("nftables", []):
        rule = item.get("rule")
        if rule and rule.get("comment") == "refarch-policy-drop":
            for expr in rule.get("expr", []):
                if "counter" in expr:
                    total += expr["counter"]["packets"]
    return total


def unexpected(result: ScanResult, allowed: list[str], names: dict[str, str]) -> list[str]:
    """Open ports beyond ``allowed`` ("tcp/22"), as "node2 10.213.0.11
    tcp/8099" (``names``: address -> node name)."""
    return [f"{names.get(addr, addr)} {addr} {port}" for addr, ports in sorted(result.open_ports.items())
            for port in ports if port not in allowed]


def password_offered(result: ScanResult, names: dict[str, str]) -> list[str]:
    """Nodes whose sshd offers a password method: "node2 (password)"."""
    out = []
    for addr, methods in sorted(result.ssh_methods.items()):
        bad = [m for m in methods if m in PASSWORD_METHODS]
        if bad:
            out.append(f"{names.get(addr, addr)} ({', '.join(bad)})")
    return out
