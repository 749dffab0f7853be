"""The fault cases' injections and reverts: each breaks (or mends) one node
of a deployed local cluster out of band (``podman exec`` into the node,
``nsenter`` into its network namespace for firewall rules, the run's
``run.json`` overrides, the cloud driver the checks' child pytest gets).
The catalogue (:mod:`.catalogue`) pairs them into fault cases.
"""

from __future__ import annotations

import ipaddress
import subprocess
import sys
from pathlib import Path

from .. import proc
from ..judge import neighbour
from ..run import RunDir
from .base import FaultContext, backup, restore

FIREWALL = ("add table inet refarch_fault; "
            "add chain inet refarch_fault input {{ type filter hook input priority 0; policy accept; }}; "
            "add rule inet refarch_fault input ct state established,related accept; "
            "add rule inet refarch_fault input ip saddr {cidr} tcp dport != 22 drop")


def expect(**overrides):
    """Inject: the profile the run's checks read (``run.json`` overrides)
    expects more than the cluster has; the previous overrides are kept for
    the revert."""
    def inject(ctx: FaultContext) -> None:
        rd = RunDir.open(ctx.run_id)
        before = rd.read_meta().get("overrides", {})
        rd.update_meta(overrides={**before, **overrides}, overrides_before_fault=before)
    return inject


def expect_revert(ctx: FaultContext) -> None:
    rd = RunDir.open(ctx.run_id)
    meta = rd.read_meta()
    meta["overrides"] = meta.pop("overrides_before_fault", meta.get("overrides", {}))
    rd.write_meta(meta)


def rename_interface(old: str, new: str):
    """Inject or revert: the second node's cluster interface gets another
    name (as ``ens3`` beside ``eth0`` on mixed images); its addresses stay,
    the default route is put back."""
    def apply(ctx: FaultContext) -> None:
        node = ctx.node(1)
        gateway = str(next(ipaddress.ip_network(ctx.contract.cluster_cidr).hosts()))
        for cmd in (("link", "set", old, "down"), ("link", "set", old, "name", new), ("link", "set", new, "up"),
                    ("route", "replace", "default", "via", gateway, "dev", new)):
            ctx.netns(node, "ip", *cmd)
    return apply


#: Where the training workloads wrap the tape for gradient averaging.
WORKLOADS = "/opt/horovod/bin/tf2_synthetic_benchmark.py /opt/horovod/bin/digits_convergence.py"


def no_gradient_averaging(ctx: FaultContext) -> None:
    """Inject: every node's training workloads use a plain GradientTape (no
    DistributedGradientTape, no allreduce of the gradients): each rank
    trains on its own gradients."""
    ctx.sh_every_node(f"for f in {WORKLOADS}; do {backup('$f')} && "
                      "sed -i -e 's/tape = hvd.DistributedGradientTape(tape)/pass  # refarch fault F10/'"
                      " -e 's/return \\[hvd.allreduce(g, op=hvd.Average) for g in grads\\]/return list(grads)"
                      "  # refarch fault F10/' $f; done")


def gradient_averaging_back(ctx: FaultContext) -> None:
    ctx.sh_every_node(f"for f in {WORKLOADS}; do {restore('$f')}; done")


def exposed_port(ctx: FaultContext) -> None:
    """Inject: a listener on 0.0.0.0:8099 on the second node, and a rule at
    the head of the run's network policy that admits TCP 8099 from
    anywhere (what a hand-edited security group does)."""
    table = ctx.contract.network_policy["table"]
    proc.run(["podman", "exec", "-d", ctx.container(ctx.node(1)), "python3", "-m", "http.server", "8099"], timeout_s=30)
    proc.run(["nft", "insert", "rule", "inet", table, "forward", "tcp", "dport", "8099", "accept",
              "comment", '"refarch-fault-exposed"'], timeout_s=30)


def exposed_port_revert(ctx: FaultContext) -> None:
    _exposed_port_revert_rules(ctx)
    ctx.sh(ctx.node(1), "pkill -f 'http.server 8099'; sleep 1", check=False)


#: A UDP service that never answers (as rpcbind does not answer nmap's
#: probe of a wrong program): only the arrival counters can see it exposed.
_SILENT_UDP = ("import socket, time; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
               "s.bind(('0.0.0.0', {port})); time.sleep(86400)")


def udp_exposed(port: int):
    """Inject: a silent UDP listener on 0.0.0.0:``port`` on the second node,
    and a rule at the head of the run's network policy that admits UDP
    ``port`` from anywhere (rpcbind exposed after nfs-common came in)."""
    def inject(ctx: FaultContext) -> None:
        table = ctx.contract.network_policy["table"]
        proc.run(["podman", "exec", "-d", ctx.container(ctx.node(1)), "python3", "-c",
                  _SILENT_UDP.format(port=port), f"refarch-fault-udp{port}"], timeout_s=30)
        proc.run(["nft", "insert", "rule", "inet", table, "forward", "udp", "dport", str(port), "accept",
                  "comment", '"refarch-fault-exposed"'], timeout_s=30)
    return inject


def udp_exposed_revert(port: int):
    def revert(ctx: FaultContext) -> None:
        _exposed_port_revert_rules(ctx)
        ctx.sh(ctx.node(1), f"pkill -f 'refarch-fault-udp{port}'; sleep 1", check=False)
    return revert


def _exposed_port_revert_rules(ctx: FaultContext) -> None:
    table = ctx.contract.network_policy["table"]
    listing = proc.run(["nft", "-a", "list", "chain", "inet", table, "forward"], timeout_s=30).stdout
    for line in listing.splitlines():
        if "refarch-fault-exposed" in line and "# handle " in line:
            handle = line.rsplit("# handle ", 1)[1].strip()
            proc.run(["nft", "delete", "rule", "inet", table, "forward", "handle", handle], timeout_s=30)


def both(*steps):
    """Inject or revert: each of ``steps`` in turn."""
    def apply(ctx: FaultContext) -> None:
        for step in steps:
            step(ctx)
    return apply


#: The busy neighbour of each run's fault case (refarch.judge.neighbour), by run id.
_NEIGHBOURS: dict[str, subprocess.Popen] = {}


def busy_neighbour(ctx: FaultContext) -> None:
    """Inject: while the np=1 benchmark job runs on the first node, four busy
    loops share that node's CPU (refarch.judge.neighbour); the np=N job runs
    undisturbed, so np=1 alone is measured far slower than np=1 in rounds."""
    log = RunDir.open(ctx.run_id).logs / "neighbour.log"
    with open(log, "w", encoding="utf-8") as out:
        _NEIGHBOURS[ctx.run_id] = subprocess.Popen(
            [sys.executable, "-m", "refarch.judge.neighbour", ctx.container(ctx.node(0)), "--gloo -np 1", "4", "900"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def busy_neighbour_gone(ctx: FaultContext) -> None:
    watcher = _NEIGHBOURS.pop(ctx.run_id, None)
    if watcher is not None:
        watcher.terminate()  # it stops its busy loops as it exits
        watcher.wait(timeout=90)
    # Proven gone, not assumed: a loop its exit missed would slow every later
    # job on the node.
    mark = neighbour.mark_pattern()
    ctx.sh(ctx.node(0), f"pkill -f '{mark}'; sleep 1; if pgrep -af '{mark}'; then "
                        "echo 'busy loops of refarch.judge.neighbour still run' >&2; exit 1; fi")


def mtu_blackhole(largest: int):
    """Inject: the second node drops every packet above ``largest`` bytes
    to and from the first node, silently (an overlay network whose path
    MTU is below the interfaces' 1500: small pings pass; SSH key exchange,
    MPI and the share hang).  An nftables table in its network namespace."""
    def inject(ctx: FaultContext) -> None:
        peer = ctx.contract.node(ctx.node(0)).address
        ctx.netns(ctx.node(1), "nft", (
            "add table inet refarch_fault_mtu; "
            "add chain inet refarch_fault_mtu input { type filter hook input priority 0; policy accept; }; "
            "add chain inet refarch_fault_mtu output { type filter hook output priority 0; policy accept; }; "
            f"add rule inet refarch_fault_mtu input ip saddr {peer} meta length > {largest} drop; "
            f"add rule inet refarch_fault_mtu output ip daddr {peer} meta length > {largest} drop"))
    return inject


#: The SSH session an sshfs mount of the share runs (``ssh ... -s -- user@server sftp``).
_SSHFS_SESSION = "^ssh .*@{server} sftp$"


def no_sftp(ctx: FaultContext) -> None:
    """Inject: the share's server (first node) drops sshd's sftp subsystem
    (a hardening role turning it off), and the second node's sshfs loses
    its SSH session (SIGKILL), so its next access reconnects into the
    server without SFTP."""
    ctx.sh(ctx.node(0), backup("/etc/ssh/sshd_config")
           + " && sed -i 's/^Subsystem/#Subsystem/' /etc/ssh/sshd_config && systemctl reload ssh")
    ctx.sh(ctx.node(1), f"pkill -9 -f '{_SSHFS_SESSION.format(server=ctx.node(0))}'; sleep 1", check=False)


def sftp_back(ctx: FaultContext) -> None:
    """The server's sshd_config back; the second node's sshfs reconnects on
    its next access (option reconnect), proven by reading the share."""
    ctx.sh(ctx.node(0), restore("/etc/ssh/sshd_config") + " && systemctl reload ssh")
    ctx.sh(ctx.node(1), f"for i in $(seq 15); do su - {ctx.training_user} -c 'ls -A /shared >/dev/null 2>&1' "
                        "&& exit 0; sleep 1; done; echo '/shared still unusable 15 s after sftp came back' >&2; exit 1")


#: Where F4 keeps the node's own TensorFlow while another one is installed.
_TF_ASIDE = "/root/refarch-fault-tensorflow"

#: F4 on the node, in the Horovod environment's Python: ``aside`` moves
#: every file and folder of the installed tensorflow-cpu distribution (its
#: RECORD: the package folders, the dist-info, the scripts in bin/) to
#: _TF_ASIDE, keeping their paths; ``back`` removes what is at those paths
#: now (the other version's folders, what pip uninstall left) and moves
#: them back.  A rename each way instead of reinstalling the pinned wheel:
#: the node's files come back as they were (inode, mode, content).
_TF_STASH = r"""
import importlib.metadata as md, json, os, pathlib, shutil, sys
aside = pathlib.Path(sys.argv[2])
listing = aside / "paths.json"
if sys.argv[1] == "aside":
    if aside.exists():
        sys.exit(f"{aside} exists: an earlier F4 was not reverted")
    dist = md.distribution("tensorflow-cpu")
    base = pathlib.Path(dist.locate_file("")).resolve()
    paths = set()
    for f in dist.files:
        full = pathlib.Path(os.path.normpath(base / f))
        rel = full.relative_to(base) if full.is_relative_to(base) else None
        paths.add(str(base / rel.parts[0]) if rel is not None and len(rel.parts) > 1 else str(full))
    paths = sorted(p for p in paths if os.path.lexists(p))
    aside.mkdir(parents=True)
    for i, p in enumerate(paths):
        os.rename(p, aside / str(i))
    listing.write_text(json.dumps(paths))
else:
    paths = json.loads(listing.read_text())
    for i, p in enumerate(paths):
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        elif os.path.lexists(p):
            os.remove(p)
        os.rename(aside / str(i), p)
    listing.unlink()
    aside.rmdir()
"""


def _tf_stash(ctx: FaultContext, action: str) -> None:
    script = _TF_STASH.replace("'", "'\\''")
    ctx.sh(ctx.node(1), f"/opt/horovod/bin/python -c '{script}' {action} {_TF_ASIDE}")


def inject_tf(ctx: FaultContext) -> None:
    """TensorFlow 2.14.1 on the second node only: the node's own 2.15.1 is
    moved aside (_TF_STASH), then 2.14.1 is installed from its wheel, cached
    on the host and copied in (no download from the node)."""
    from ..paths import cache_dir

    wheels = cache_dir() / "fault-wheels"
    if not any(wheels.glob("tensorflow_cpu-2.14.1-*.whl")):
        proc.run(["python3", "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                  "--python-version", "3.11", "--platform", "manylinux_2_17_x86_64", "-d", str(wheels),
                  "tensorflow-cpu==2.14.1"], timeout_s=900)
    node = ctx.node(1)
    ctx.sh(node, "mkdir -p /srv/fault-wheels")
    for whl in wheels.glob("tensorflow_cpu-2.14.1-*.whl"):
        proc.run(["podman", "cp", str(whl), f"{ctx.container(node)}:/srv/fault-wheels/"], timeout_s=300)
    _tf_stash(ctx, "aside")
    ctx.sh(node, "/opt/horovod/bin/pip install -q --no-deps --no-compile --no-index --find-links /srv/fault-wheels "
                 "tensorflow-cpu==2.14.1")


def revert_tf(ctx: FaultContext) -> None:
    """2.14.1 uninstalled, the node's own TensorFlow moved back."""
    ctx.sh(ctx.node(1), "/opt/horovod/bin/pip uninstall -q -y tensorflow-cpu")
    _tf_stash(ctx, "back")


#: The second link of :func:`peer_route`, on each of the first two nodes.
SIDE_LINK = "rfside0"


def peer_route(ctx: FaultContext) -> None:
    """Inject: a second link between the first two nodes (a veth pair: a
    second port on another network) and on each a host route that sends the
    other's cluster address over it.  Every socket still binds the cluster
    address on the cluster interface; its packets leave by the second link."""
    first, second = ctx.node(0), ctx.node(1)
    pid = proc.container_pid(ctx.container(second))
    ctx.netns(first, "ip", "link", "add", SIDE_LINK, "type", "veth", "peer", "name", SIDE_LINK, "netns", pid)
    for node, peer in ((first, second), (second, first)):
        ctx.netns(node, "ip", "link", "set", SIDE_LINK, "up")
        ctx.netns(node, "ip", "route", "add", f"{ctx.contract.node(peer).address}/32", "dev", SIDE_LINK)


def peer_route_revert(ctx: FaultContext) -> None:
    """Delete the veth pair of :func:`peer_route` (both ends and their routes)."""
    ctx.netns(ctx.node(0), "ip", "link", "del", SIDE_LINK)


def routes_state(ctx: FaultContext) -> dict[str, str]:
    """The first two nodes' links and routes (``ip -o link``, ``ip route``)."""
    return {f"{node}: {what}": ctx.netns(node, "ip", *cmd).stdout.strip()
            for node in (ctx.node(0), ctx.node(1))
            for what, cmd in (("links", ("-o", "link", "show")), ("routes", ("route", "show")))}


#: A host firewall on the first node that admits what the cluster needs and
#: has no rule for loopback: what a node sends to 127.0.0.1 is dropped.
LOOPBACK_DROP = ("add table inet refarch_fault_lo; "
                 "add chain inet refarch_fault_lo input { type filter hook input priority 0; policy accept; }; "
                 "add rule inet refarch_fault_lo input iif lo ip saddr 127.0.0.0/8 drop")


#: F23's limits file on the second node.
LIMITS_FAULT = "/etc/security/limits.d/90-refarch-fault-nofile.conf"


def memory_limit(mib: int):
    """Inject: the second node's container memory limited to ``mib`` MiB
    (``podman update``: its cgroup), the limit before kept for the revert."""
    def inject(ctx: FaultContext) -> None:
        container = ctx.container(ctx.node(1))
        before = proc.run(["podman", "inspect", "-f", "{{.HostConfig.Memory}}", container], timeout_s=30).stdout.strip()
        _MEMORY_BEFORE[ctx.run_id] = before
        proc.run(["podman", "update", "--memory", f"{mib}m", container], timeout_s=60)
    return inject


#: The second node's memory limit (bytes, "0" none) before :func:`memory_limit`, by run id.
_MEMORY_BEFORE: dict[str, str] = {}


def memory_limit_back(ctx: FaultContext) -> None:
    """Revert :func:`memory_limit`: the limit the container had."""
    before = _MEMORY_BEFORE.pop(ctx.run_id, "0")
    proc.run(["podman", "update", "--memory", before if before != "0" else "-1", ctx.container(ctx.node(1))],
             timeout_s=60)


def memory_state(ctx: FaultContext) -> dict[str, str]:
    """The second node's memory limit as its cgroup shows it."""
    node = ctx.node(1)
    return {f"{node}: memory limit": ctx.sh(node, "cat /sys/fs/cgroup/memory.max 2>/dev/null || "
                                                  "cat /sys/fs/cgroup/memory/memory.limit_in_bytes").stdout.strip()}


def cpu_quota_file(ctx: FaultContext) -> Path:
    """The host's CPU quota file of the second node's container: cgroup v1
    ``cpu.cfs_quota_us`` (microseconds per 100 ms period, -1 none) or v2
    ``cpu.max`` ("max 100000"), found from its init process's cgroup.
    (``podman update --cpus`` sets a quota but cannot lift it again.)"""
    pid = proc.container_pid(ctx.container(ctx.node(1)))
    for line in Path(f"/proc/{pid}/cgroup").read_text(encoding="utf-8").splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return Path("/sys/fs/cgroup/cpu") / path.lstrip("/") / "cpu.cfs_quota_us"
        if controllers == "" and Path("/sys/fs/cgroup/cgroup.controllers").exists():
            return Path("/sys/fs/cgroup") / path.lstrip("/").removesuffix("/init.scope") / "cpu.max"
    raise RuntimeError(f"no CPU cgroup of {ctx.container(ctx.node(1))} (pid {pid})")


#: The second node's CPU quota (the file's text) before :func:`cpu_quota`, by run id.
_CPU_BEFORE: dict[str, str] = {}


def cpu_quota(cpus: float):
    """Inject: the second node's container limited to ``cpus`` CPUs (its
    cgroup's quota per 100 ms period), the quota before kept for the revert."""
    def inject(ctx: FaultContext) -> None:
        path = cpu_quota_file(ctx)
        _CPU_BEFORE[ctx.run_id] = path.read_text(encoding="utf-8").strip()
        quota = str(int(cpus * 100000))
        path.write_text(quota if path.name == "cpu.cfs_quota_us" else f"{quota} 100000", encoding="utf-8")
    return inject


def cpu_quota_back(ctx: FaultContext) -> None:
    """Revert :func:`cpu_quota`: the quota the container had."""
    cpu_quota_file(ctx).write_text(_CPU_BEFORE.pop(ctx.run_id, "-1"), encoding="utf-8")


def cpu_state(ctx: FaultContext) -> dict[str, str]:
    """The second node's CPU quota as the host's cgroup shows it."""
    return {f"{ctx.node(1)}: CPU quota": cpu_quota_file(ctx).read_text(encoding="utf-8").strip()}
