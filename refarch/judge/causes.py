"""Root causes read from the other side of a failure.

A check that fails on one node often fails for a reason that only another
place knows: a login refused for the target sshd's own reason (in the
target's journal), a share that died because its server stopped serving
it, a TCP session that hangs because the network path between two nodes
drops large packets.  The pure functions here judge recorded outputs
(unit-tested on real ones in tests/unit/data/causes); the gatherers take
pytest-testinfra hosts and run as root on the node named, over the same
admin SSH path the node logs use (refarch.pytest.nodelogs.collect_node_logs).

Field reports these stand for: F18 (path MTU blackhole), F19
(sshd's own refusal), F20 (the share's server side).
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from . import checks

# Network path --------------------------------------------------------------------
#: Bytes of IPv4 and ICMP headers around a ping's payload: a don't-fragment
#: ping of ``size`` bytes is an IP packet of ``size + 28`` bytes.
ICMP_OVERHEAD = 28
#: The least MTU every IPv4 path must carry (RFC 791: 576 bytes), the floor
#: of the path MTU search.
MIN_PATH_MTU = 576
#: Echo requests sent to measure loss on a path, and their interval (seconds).
LOSS_PINGS, LOSS_INTERVAL_S = 20, 0.05
#: Loss (percent) above which a path is faulty: a healthy cluster network
#: loses none of 20 pings; TCP slows badly at a few percent.
MAX_LOSS_PCT = 5.0


@dataclass(frozen=True)
class PathReport:
    """What the pairwise probe found from ``source`` to ``target`` (its
    cluster ``address``): ``reachable`` (small pings answered),
    ``interface_mtu`` (bytes, the source's cluster interface),
    ``path_mtu`` (bytes: the largest don't-fragment IP packet answered,
    0 when none), ``loss_pct`` (percent of :data:`LOSS_PINGS` small pings)."""

    source: str
    target: str
    address: str
    interface: str
    interface_mtu: int
    reachable: bool
    path_mtu: int
    loss_pct: float
    #: The interface the source's routing table sends ``address`` out of
    #: (``ip route get``), "" when not looked up.
    route_interface: str = ""

    def problem(self) -> str:
        """The root cause in one line (``"node1 -> node2 (10.0.0.2): packets above
        1400 bytes vanish ..."``), or "" for a healthy path."""
        pair = f"{self.source} -> {self.target} ({self.address})"
        if not self.reachable:
            elsewhere = (f": {self.source}'s route to {self.address} leaves by {self.route_interface}, not "
                         f"{self.interface}" if self.route_interface not in ("", self.interface) else "")
            return f"{pair}: unreachable on the cluster network ({LOSS_PINGS} of {LOSS_PINGS} pings lost){elsewhere}"
        if self.path_mtu < self.interface_mtu:
            return (f"{pair}: packets above {self.path_mtu} bytes vanish (path MTU blackhole): the largest "
                    f"don't-fragment ping that passes is {self.path_mtu - ICMP_OVERHEAD} bytes of payload, "
                    f"below {self.interface}'s MTU {self.interface_mtu}; SSH, MPI and the share hang on it")
        if self.loss_pct > MAX_LOSS_PCT:
            return f"{pair}: {self.loss_pct:g} % of {LOSS_PINGS} pings lost (at most {MAX_LOSS_PCT:g} %)"
        return ""


def parse_ping_loss(text: str) -> float:
    """Percent of packets lost in ``ping -q``'s summary line.

    Raises:
        ValueError: no summary line (ping did not run).
    """
    m = re.search(r"(\d+) packets transmitted, (\d+) (?:packets )?received", text)
    if not m:
        raise ValueError(f"no ping summary in {text.strip()[-200:]!r}")
    sent, got = int(m.group(1)), int(m.group(2))
    return round(100.0 * (sent - got) / sent, 1) if sent else 100.0


def largest_passing(passes, low: int, high: int) -> int:
    """The largest size in [low, high] for which ``passes(size)`` is true,
    assuming every smaller size passes once one does (a path drops packets
    above a size); ``low - 1`` when even ``low`` fails.  Bisection: about
    log2(high - low) calls of ``passes`` (10 from 576 to 1500 bytes)."""
    if passes(high):
        return high
    if not passes(low):
        return low - 1
    good, bad = low, high
    while bad - good > 1:
        mid = (good + bad) // 2
        if passes(mid):
            good = mid
        else:
            bad = mid
    return good


def interface_of(host, address: str) -> str:
    """The interface of testinfra ``host`` that carries IPv4 ``address``
    (``ip -o -4 addr show to``), "" when none does."""
    return host.check_output(f"ip -o -4 addr show to {address} | awk '{{print $2}}'").strip()


def route_interface(route_get: str) -> str:
    """The interface in ``ip -o route get ADDRESS``'s output (``"10.0.0.3 dev
    eth0 src 10.0.0.2 uid 0"`` -> ``"eth0"``), "" when it names none."""
    words = route_get.split()
    return words[words.index("dev") + 1] if "dev" in words[:-1] else ""


def probe_path(host, source: str, target: str, address: str, interface: str) -> PathReport:
    """Probe the path from ``host`` (node ``source``) to ``target`` at
    ``address`` over ``interface``: loss of 20 small pings 50 ms apart,
    then don't-fragment pings (``ping -M do``, two tries of 1 s each) at
    the interface MTU and, when that fails, bisecting down to the largest
    packet that passes.  Measured: 1.2 s on a healthy path, about 12 s on
    a blackholed one (F18), 6.4 s to an address that does not answer.

    Raises:
        ValueError: ping is missing on the node, or printed no summary.
    """
    with host.sudo():
        mtu = int(host.check_output(f"cat /sys/class/net/{interface}/mtu"))
        r = host.run(f"ping -n -q -c {LOSS_PINGS} -i {LOSS_INTERVAL_S} -W 1 -I {interface} {address}")
        if r.rc == 127:
            raise ValueError(f"{source}: ping is not installed (Debian package iputils-ping, in the pins' "
                             "node_packages: the common role installs it)")
        loss = parse_ping_loss(r.stdout + r.stderr)
        if loss >= 100.0:
            route = route_interface(host.run(f"ip -o route get {address}").stdout)
            return PathReport(source, target, address, interface, mtu, False, 0, loss, route)

        def passes(packet: int) -> bool:
            # Two tries: one packet lost by chance is no smaller path MTU.
            return host.run(f"ping -n -q -M do -c 2 -i 0.2 -W 1 -s {packet - ICMP_OVERHEAD} -I {interface} "
                            f"{address}").rc == 0

        path_mtu = largest_passing(passes, MIN_PATH_MTU, mtu)
    return PathReport(source, target, address, interface, mtu, True, max(path_mtu, 0), loss)


#: (run id, source, target) -> the root cause on that path ("" healthy):
#: probed once per pytest session (:func:`path_problem`).
_PATHS: dict[tuple[str, str, str], str] = {}


def path_problem(cluster, hosts, source: str, target: str) -> str:
    """The root cause on the path ``source`` -> ``target`` ("" when healthy),
    probed once per session (:func:`probe_path`) and kept until
    :func:`forget_paths`.  Checks whose commands would hang on a bad path
    (SSH, mpirun, the share, a launch across nodes) ask this first and fail
    at once quoting it, instead of each waiting out its own timeout.

    Raises:
        ValueError: ping is missing on ``source``.
    """
    key = (cluster.contract.run_id, source, target)
    if key not in _PATHS:
        contract, host = cluster.contract, hosts[source]
        own = contract.node(source).address
        iface = interface_of(host, own)
        if not iface:
            _PATHS[key] = f"{source}: no interface carries its cluster address {own}"
        else:
            _PATHS[key] = probe_path(host, source, target, contract.node(target).address, iface).problem()
    return _PATHS[key]


def forget_paths(run_id: str) -> None:
    """Drop the paths probed for ``run_id`` (a node was stopped, restarted
    or cut off on purpose: the next check probes again)."""
    for key in [k for k in _PATHS if k[0] == run_id]:
        del _PATHS[key]


def path_problems(cluster, hosts, pairs) -> list[str]:
    """:func:`path_problem` of each (source, target) in ``pairs``, the
    faulty ones only, in the order of ``pairs``.  The sources probe in
    parallel, each its own targets in turn (a testinfra host is not shared
    between threads): N nodes' N x (N-1) paths take about (N-1) probes'
    time, not N x (N-1).

    Raises:
        ValueError: ping is missing on a source.
    """
    warm_paths(cluster, hosts, pairs)
    return [why for why in (path_problem(cluster, hosts, a, b) for a, b in pairs) if why]


def warm_paths(cluster, hosts, pairs) -> None:
    """Probe ``pairs`` into :func:`path_problem`'s cache, the sources in
    parallel (each its own targets in turn).  A source that cannot be
    probed (SSH down, ping missing) is left out: whoever asks for its paths
    probes it again and gets the error."""
    targets: dict[str, list[str]] = {}
    for a, b in pairs:
        targets.setdefault(a, []).append(b)

    def probe_from(source: str) -> None:
        try:
            for target in targets[source]:
                path_problem(cluster, hosts, source, target)
        except Exception:  # noqa: BLE001, S110 - asked again, with its error, by the check of that path
            pass

    if len(targets) > 1:
        with ThreadPoolExecutor(max_workers=len(targets)) as pool:
            list(pool.map(probe_from, targets))


# sshd's own reasons ---------------------------------------------------------------
#: Messages of sshd (journal identifier ``sshd``) that say why it refused a
#: login, as OpenSSH 9.2 and its PAM stack print them (recorded in
#: tests/unit/data/causes).  The last one is what sshd says when the client
#: offered keys and none was accepted and nothing else is logged.
SSHD_REFUSALS = (
    re.compile(r"^Authentication refused: .+"),
    re.compile(r"^User \S+ from \S+ not allowed because .+"),
    re.compile(r"^User \S+ not allowed because .+"),
    re.compile(r"^pam_unix\(sshd:account\): .+"),
    re.compile(r"^fatal: Access denied for user .+"),
    re.compile(r"^Invalid user \S+ from .+"),
    re.compile(r"^Failed publickey for .+"),
)
_NO_KEY = re.compile(r"^Connection closed by authenticating user (\S+) ")


def sshd_refusals(journal_json: str, client_address: str) -> list[str]:
    """Why the target's sshd refused the logins from ``client_address``:
    ``journalctl -t sshd -o json`` lines -> one reason per refused
    connection, oldest first (``"Authentication refused: bad ownership or
    modes for directory /home/hvd"``).  A connection is the sshd process
    (``_PID``) whose messages name the client's address, or no address
    at all (PAM's refusals; the caller's time window bounds them); one that only
    says the connection closed at authentication is "no key of <user> was
    accepted".  Accepted logins and other clients are left out."""
    by_pid: dict[str, list[str]] = {}
    for line in journal_json.splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get("MESSAGE")
        if isinstance(message, str):
            by_pid.setdefault(str(entry.get("_PID", "")), []).append(message)
    reasons = []
    for messages in by_pid.values():
        # sshd names the client in most messages ("from 10.0.0.1 port
        # 22"); a refusal by PAM names none: kept, within the time window.
        clients = {m.group(2) for m in (re.search(r"(from |user \S+ )(\S+) port \d+", x) for x in messages) if m}
        if clients and client_address not in clients:
            continue
        if any(m.startswith("Accepted ") for m in messages):
            continue
        found = [m for m in messages if any(p.match(m) for p in SSHD_REFUSALS)]
        if found:
            reasons.append("; ".join(dict.fromkeys(found)))
            continue
        no_key = [_NO_KEY.match(m) for m in messages]
        users = [m.group(1) for m in no_key if m]
        if users:
            reasons.append(f"no key of {users[0]}'s was accepted (sshd logs only: connection closed by "
                           "authenticating user)")
    return reasons


def sshd_reason(target_host, target: str, client_address: str, since_epoch: float) -> str:
    """The target sshd's reason for refusing the logins from
    ``client_address`` since ``since_epoch`` (seconds), read from its
    journal as root: ``"node2's sshd: Authentication refused: ..."``, or ""
    when the journal names none (or cannot be read)."""
    with target_host.sudo():
        r = target_host.run(f"journalctl -t sshd --since @{int(since_epoch) - 1} -o json --no-pager")
    if r.rc != 0:
        return ""
    reasons = sshd_refusals(r.stdout, client_address)
    return f"{target}'s sshd: {reasons[-1]}" if reasons else ""


def clock(host) -> float:
    """``host``'s clock now (seconds since the epoch): where a login attempt
    starts in the target's journal."""
    return float(host.check_output("date +%s.%N"))


#: Login shells that end every session at once (sshd accepts the key, and
#: the login prints "This account is currently not available.").
NO_LOGIN_SHELLS = ("/usr/sbin/nologin", "/sbin/nologin", "/bin/false", "/usr/bin/false")


def login_refusal(hosts, cluster, source: str, target: str, since_epoch: float, user: str = "") -> str:
    """The target sshd's reason for refusing ``source``'s logins since
    ``since_epoch`` (:func:`sshd_reason` over ``hosts[target]``, the admin
    path); when sshd names none, ``user``'s login shell on the target if
    it admits no session (``"node2: hvd's login shell is
    /usr/sbin/nologin"``); else ""."""
    reason = sshd_reason(hosts[target], target, cluster.contract.node(source).address, since_epoch)
    if reason or not user:
        return reason
    entry = hosts[target].run(f"getent passwd {user}").stdout.strip().split(":")
    if len(entry) == 7 and entry[6] in NO_LOGIN_SHELLS:
        return f"{target}: {user}'s login shell is {entry[6]}"
    return ""


# The share's server side --------------------------------------------------------------
def sftp_problem(sshd_t: str) -> str:
    """``sshd -T`` of the sshfs server -> why it cannot serve the share over
    SFTP ("" when its sshd offers the sftp subsystem)."""
    subsystems = checks.parse_sshd_t(sshd_t).get("subsystem", [])
    if any(s.split()[:1] == ["sftp"] for s in subsystems):
        return ""
    return "its sshd offers no sftp subsystem (sshd -T lists " + (
        ", ".join(repr(s) for s in subsystems) if subsystems else "no Subsystem") + ")"


def nfs_problem(nfs_server_active: str, exportfs_v: str, export: str) -> str:
    """The NFS server's side of a share: ``systemctl is-active nfs-server``
    and ``exportfs -v`` -> why it cannot serve ``export`` ("" when it can)."""
    problems = []
    if nfs_server_active.strip() != "active":
        problems.append(f"nfs-server is {nfs_server_active.strip() or 'unknown'}")
    if export not in checks.parse_exportfs(exportfs_v):
        problems.append(f"{export} is not exported (exportfs -v lists "
                        + (", ".join(sorted(checks.parse_exportfs(exportfs_v))) or "nothing") + ")")
    return "; ".join(problems)


def share_server_problem(server_host, server: str, storage_type: str, export: str) -> str:
    """Why the share's server ``server`` does not serve ``export`` now
    (``"node1: its sshd offers no sftp subsystem (...)"``), or "" when its
    side looks healthy; read as root on the server."""
    with server_host.sudo():
        if storage_type == "sshfs":
            problem = sftp_problem(server_host.run("/usr/sbin/sshd -T").stdout)
        else:
            problem = nfs_problem(server_host.run("systemctl is-active nfs-server").stdout,
                                  server_host.run("exportfs -v").stdout, export)
    return f"{server} (the share's server): {problem}" if problem else ""


def sshfs_client_state(client_host, client: str, server: str) -> str:
    """The sshfs client's side: whether its SFTP session to ``server`` is up
    (``"node2's sshfs has no SSH session to node1 (its reconnects
    fail)"``), "" when it is or the share is not sshfs."""
    with client_host.sudo():
        r = client_host.run("pgrep -af '^/sbin/mount.fuse.sshfs|^sshfs '")
        if r.rc != 0:
            return f"{client}: no sshfs process serves the mount"
        session = client_host.run(f"pgrep -af '^ssh .* {server} sftp$|^ssh .*@{server} sftp$'")
    return "" if session.rc == 0 else f"{client}'s sshfs has no SSH session to {server} (its reconnects fail)"


def owner_problem(owners: dict[str, str], domains: dict[str, str]) -> str:
    """One file's owner as each place sees it (``{"node2": "65534:65534
    nobody:nogroup", "node1:/srv/shared": "2001:2001 hvd:hvd"}``, from
    ``stat -c '%u:%g %U:%G'``) -> the mismatch in one line, naming the
    NFSv4 idmapd domains (``nfsidmap -d`` per node) when they differ:
    NFSv4 sends owners as user@domain, and a node of another domain maps
    them to nobody (F22).  "" when every place agrees."""
    if len(set(owners.values())) <= 1:
        return ""
    text = "the owner differs: " + ", ".join(f"{where} sees {owner or '(nothing)'}" for where, owner in owners.items())
    if len(set(domains.values())) > 1:
        text += "; NFSv4 idmapd domains differ: " + ", ".join(
            f"{node} {domain!r}" for node, domain in sorted(domains.items())) + " (nfsidmap -d)"
    return text
