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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nmap

from .. import proc
from .arrivals import ARRIVAL_TABLE, arrival_ruleset, edge_ruleset, edge_table, exposed_by_arrival, read_counters

PROBE_KINDS = ("admin", "outside")


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


def port_key(port: str) -> tuple[str, int]:
    """Sort key of "tcp/22", "udp/111": protocol, then port number."""
    proto, number = port.split("/")
    return proto, int(number)


@dataclass
class ScanResult:
    """What one probe saw: {node address: sorted ["tcp/22", "udp/123"]} of
    open ports, and {node address: [methods]} sshd offered."""

    probe: Probe
    open_ports: dict[str, list[str]] = field(default_factory=dict)
    ssh_methods: dict[str, list[str]] = field(default_factory=dict)
    seconds: float = 0.0
    #: This probe's packets that reached a node's edge but not the node (the
    #: run's policy, or the node's own filters, stopped them).
    dropped: int = 0
    #: {node address: packets this probe sent towards it}, counted on this
    #: host before the run's policy (the scan reached each node's edge).
    reached: dict[str, int] = field(default_factory=dict)
    #: {node address: packets of this probe that got into the node}.
    arrived: dict[str, int] = field(default_factory=dict)
    #: {node address: ["udp/111"]}: listening ports the probe's packets
    #: reached, counted as open whether or not the service answered.
    open_by_arrival: dict[str, list[str]] = field(default_factory=dict)
    #: UDP ports sent to (the nodes' listening ones and nmap's most frequent).
    udp_ports: list[int] = field(default_factory=list)

    def merge_open(self, address: str, ports: list[str]) -> None:
        """Add ``ports`` to the open ports of ``address`` (sorted, unique)."""
        merged = set(self.open_ports.get(address, [])) | set(ports)
        self.open_ports[address] = sorted(merged, key=port_key)

    def as_dict(self) -> dict:
        """What the results and the property evidence record of the scan."""
        return {"probe": self.probe.address, "range": self.probe.cidr, "open": self.open_ports,
                "ssh_methods": self.ssh_methods, "dropped": self.dropped, "seconds": self.seconds,
                "reached": self.reached, "arrived": self.arrived, "open_by_arrival": self.open_by_arrival,
                "udp_ports": self.udp_ports}


def netns_name(run_id: str, kind: str) -> str:
    return f"{run_id}-probe-{kind}"


def host_if_name(run_id: str, kind: str) -> str:
    """veth name on the host side (at most 15 characters): ``rfp`` + the
    run id's random suffix + the kind's initial."""
    return f"rfp{run_id.rsplit('-', 1)[-1][:10]}{kind[0]}"


def plan_probes(run_id: str, probe_ranges: dict[str, str]) -> list[Probe]:
    """The probes of ``run_id`` in ``probe_ranges`` ({"admin": cidr,
    "outside": cidr}, from :func:`refarch.clouds.local.probe_ranges`): the
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
        proc.run(cmd, timeout_s=30)


def host_netns() -> list[str]:
    """The host's named network namespaces now (``ip -j netns list``)."""
    out = proc.run(["ip", "-j", "netns", "list"], timeout_s=30, check=False).stdout.strip()
    return [entry["name"] for entry in json.loads(out or "[]")]


def run_netns(run_id: str) -> list[str]:
    """Network namespaces of ``run_id``'s probes that exist now."""
    return [n for n in host_netns() if n in {netns_name(run_id, k) for k in PROBE_KINDS}]


def remove_probes(run_id: str) -> list[str]:
    """Delete ``run_id``'s probe namespaces; returns the names removed.  Each
    veth pair goes with its namespace (its peer end lives there); the host
    end is never deleted by name, since that name carries only the run id's
    random suffix and could be another run's."""
    gone = run_netns(run_id)
    for ns in gone:
        proc.run(["ip", "netns", "del", ns], timeout_s=30, check=False)
    return gone


def nmap_command(probe: Probe, addresses: list[str], udp_ports: list[int] | None = None) -> list[str]:
    """The sweep: nmap inside the probe's namespace, TCP connect scan of
    ports 1-65535 and UDP ``udp_ports`` (default 123; nmap sends each
    well-known service its request), no host discovery, sshd's offered
    methods on open SSH ports; XML on stdout.  No retries, at least 20,000
    probes/s and 100 ms per answer at most: the probe is one routed hop from
    the nodes, and a dropped port must cost no waiting (measured: 13 s per
    probe for 2 nodes; one retry and 8,000/s took 34-79 s).  A reply lost
    at this rate is caught by the careful pass and the arrival counters
    (:func:`careful_command`, :func:`arrival_ruleset`)."""
    udp = ",".join(str(p) for p in sorted(set(udp_ports or [123])))
    return ["ip", "netns", "exec", probe.netns, "nmap", "-n", "-Pn", "-sT", "-sU", "-p", f"T:1-65535,U:{udp}",
            "--max-retries", "0", "--min-rate", "20000", "--max-rtt-timeout", "100ms",
            "--script", "ssh-auth-methods", "-oX", "-", *addresses]


def careful_command(probe: Probe, addresses: list[str], ports: list[str]) -> list[str] | None:
    """The careful pass over the ports some node listens on (``ports``:
    "tcp/22", "udp/111"): nmap's default timing with 3 retries, so that no
    lost reply hides a listening port; None when there are none."""
    tcp = sorted({int(p.split("/")[1]) for p in ports if p.startswith("tcp/")})
    udp = sorted({int(p.split("/")[1]) for p in ports if p.startswith("udp/")})
    spec = ",".join([f"T:{','.join(map(str, tcp))}"] * bool(tcp) + [f"U:{','.join(map(str, udp))}"] * bool(udp))
    if not spec:
        return None
    kinds = ["-sT"] * bool(tcp) + ["-sU"] * bool(udp)
    return ["ip", "netns", "exec", probe.netns, "nmap", "-n", "-Pn", *kinds, "-p", spec, "--max-retries", "3",
            "-oX", "-", *addresses]


#: UDP ports every sweep sends to beyond the ones some node listens on: the
#: most frequent UDP services of nmap's own nmap-services table.
TOP_UDP = 20
NMAP_SERVICES = Path("/usr/share/nmap/nmap-services")


def top_udp_ports(n: int = TOP_UDP, services: Path = NMAP_SERVICES) -> list[int]:
    """The ``n`` UDP ports nmap finds open most often (nmap-services: name,
    port/proto, open frequency), most frequent first; [123] when the table
    cannot be read."""
    rows = []
    try:
        text = services.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return [123]
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and not line.startswith("#") and parts[1].endswith("/udp"):
            try:
                rows.append((float(parts[2]), int(parts[1].split("/")[0])))
            except ValueError:
                continue
    rows.sort(reverse=True)
    return [port for _freq, port in rows[:n]] or [123]


def parse_listeners(ss_output: str) -> list[str]:
    """``ss -Htuln`` -> sorted "tcp/22", "udp/123" of the sockets bound to an
    address other than loopback (what another host could reach)."""
    found = set()
    for line in ss_output.splitlines():
        parts = line.split()
        if len(parts) < 5 or parts[0] not in ("tcp", "udp"):
            continue
        local = parts[4]
        host, _, port = local.rpartition(":")
        host = host.strip("[]").split("%")[0]
        if not port.isdigit():
            continue
        if host not in ("*", "", "0.0.0.0", "::"):
            try:
                if ipaddress.ip_address(host).is_loopback:
                    continue
            except ValueError:
                continue
        found.add(f"{parts[0]}/{port}")
    return sorted(found, key=port_key)


def check_targets(addresses: list[str], node_addresses: list[str]) -> None:
    """A probe scans the run's own nodes only.

    Raises:
        ValueError: an address is not one of ``node_addresses``.
    """
    foreign = sorted(set(addresses) - set(node_addresses))
    if foreign:
        raise ValueError(f"refusing to scan {', '.join(foreign)}: not a node of this run ({node_addresses})")


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


def scan(probe: Probe, addresses: list[str], timeout_s: int = 300, udp_ports: list[int] | None = None,
         listening: list[str] | None = None) -> ScanResult:
    """Scan ``addresses`` from ``probe``: the sweep (:func:`nmap_command`),
    then the careful pass over the ``listening`` ports
    (:func:`careful_command`); a port either finds open is open.

    Raises:
        CommandError: nmap failed; PhaseTimeout: it ran past ``timeout_s``.
    """
    import time

    start = time.monotonic()
    out = proc.run(nmap_command(probe, addresses, udp_ports), timeout_s=timeout_s).stdout
    result = parse_scan(out, probe)
    careful = careful_command(probe, addresses, listening or [])
    if careful:
        again = parse_scan(proc.run(careful, timeout_s=timeout_s).stdout, probe)
        for address, ports in again.open_ports.items():
            result.merge_open(address, ports)
    result.udp_ports = sorted(set(udp_ports or [123]))
    result.seconds = round(time.monotonic() - start, 1)
    return result


def survey(run_id: str, probes: list[Probe], nodes: dict[str, str], containers: dict[str, str],
           policy_table: str) -> dict[str, ScanResult]:
    """Scan every node (``nodes``: address -> name; ``containers``: name ->
    its container on this host) from each probe, all probes at once, with
    the evidence that makes a verdict of it: the listening sockets of every
    node (``ss`` in its namespace), per-destination counters before the
    run's policy (:func:`edge_ruleset`) and arrival counters inside each
    node (:func:`arrival_ruleset`); ``dropped`` is what reached a node's
    edge but not the node.  UDP goes to
    every port a node listens on plus nmap's :data:`TOP_UDP` most frequent.
    The probes' namespaces must exist; every counter table made here is
    removed again, also on failure.  Returns {probe kind: ScanResult}.

    Raises:
        ValueError: a target is not one of the run's nodes.
        CommandError, PhaseTimeout: nmap, nft or nsenter failed.
    """
    addresses = sorted(nodes)
    check_targets(addresses, list(nodes))
    listening = {address: parse_listeners(proc.in_netns(containers[name], "ss", "-Htuln").stdout)
                 for address, name in nodes.items()}
    every = sorted({p for ports in listening.values() for p in ports}, key=port_key)
    udp_ports = sorted({int(p.split("/")[1]) for p in every if p.startswith("udp/")} | set(top_udp_ports()))
    edge = edge_table(policy_table)
    scans: dict[str, ScanResult] = {}
    try:
        proc.run(["nft", "-f", "-"], timeout_s=30, input_text=edge_ruleset(edge, probes, nodes))
        for address, name in nodes.items():
            proc.in_netns(containers[name], "nft", "-f", "-", input_text=arrival_ruleset(ARRIVAL_TABLE, probes, listening[address]))
        # The probes scan at the same time: a reply lost to the load is made
        # up for by the careful pass and the arrival counters (the seeded
        # test proves nothing is missed), and the counters keep each probe's
        # packets apart.
        with ThreadPoolExecutor(max_workers=len(probes)) as pool:
            futures = {probe.kind: pool.submit(scan, probe, addresses, udp_ports=udp_ports, listening=every)
                       for probe in probes}
            scans = {kind: future.result() for kind, future in futures.items()}
        at_edge = read_counters(proc.run(["nft", "-j", "list", "table", "inet", edge], timeout_s=30).stdout)
        for address, name in nodes.items():
            inside = read_counters(proc.in_netns(containers[name], "nft", "-j", "list", "table", "inet", ARRIVAL_TABLE).stdout)
            for kind, result in scans.items():
                result.reached[address] = at_edge.get(f"{kind} {name}", 0)
                result.arrived[address] = inside.get(f"{kind} all", 0)
                found = exposed_by_arrival(listening[address], inside, kind)
                result.open_by_arrival[address] = found
                result.merge_open(address, found)
        for result in scans.values():
            # Packets that reached a node's edge but not the node: the run's
            # policy (or the node's own filters) stopped them.
            result.dropped = sum(result.reached[a] - result.arrived[a] for a in addresses)
    finally:
        proc.run(["nft", "delete", "table", "inet", edge], timeout_s=30, check=False)
        for name in nodes.values():
            proc.in_netns(containers[name], "nft", "delete", "table", "inet", ARRIVAL_TABLE, check=False)
    return scans
