"""Fault cases: real-world faults injected into a deployed local cluster to
prove that each check can fail, with the node and the cause in its message.

Each :class:`Fault` breaks one node out of band (``podman exec`` into the
node, or ``nsenter`` into its network namespace for firewall rules), names
the checks that must then fail (a pytest ``-k`` expression over
tests/integration) and the message they must show, and reverts itself so
the next fault starts from a healthy cluster.  F1-F6 are the faults of
../shared/FAULTS.md; the others cover the remaining node and cluster checks.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import proc
from ..clouds.drivers import FAULT_DRIVER_ENV
from ..contract import Contract
from ..judge import neighbour
from ..run import RunDir


@dataclass
class FaultContext:
    """Where a fault is applied: the run's contract and its node containers."""

    run_id: str
    contract: Contract
    training_user: str = "hvd"

    def container(self, node: str) -> str:
        return f"{self.run_id}-{node}"

    def node(self, index: int) -> str:
        return self.contract.node_names[index]

    def sh(self, node: str, script: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run ``script`` as root in ``node`` (out of band, no SSH)."""
        return proc.run(["podman", "exec", self.container(node), "sh", "-c", script], timeout_s=300, check=check)

    def netns(self, node: str, *cmd: str) -> subprocess.CompletedProcess:
        """Run ``cmd`` from the host inside ``node``'s network namespace."""
        return proc.in_netns(self.container(node), *cmd)


@dataclass(frozen=True)
class Fault:
    """One fault case.

    ``checks`` selects the checks to run (pytest -k); ``must_fail`` lists
    test-id fragments that must fail; ``message`` is a regex (``{n0}``,
    ``{n1}`` stand for the first and second node name, ``{user}`` for the
    training user) that the failure messages must match; ``must_skip`` lists
    test-id fragments that must be reported as not run (skipped), and
    ``must_pass`` those that must still pass (judged on their own), and
    ``must_warn`` the property ids that must be flagged (verdict warn).
    """

    id: str
    title: str
    inject: Callable[[FaultContext], object]
    revert: Callable[[FaultContext], object]
    checks: str
    must_fail: tuple[str, ...]
    message: str
    source: str = ""
    tags: tuple[str, ...] = field(default_factory=tuple)
    must_skip: tuple[str, ...] = ()
    must_pass: tuple[str, ...] = ()
    #: Property ids whose verdict must be "warn" (results.json of the checks).
    must_warn: tuple[str, ...] = ()
    #: Stops and starts nodes: runs only with --long-properties (tox -e
    #: availability), and its checks get --long-properties too.  It runs
    #: alone (see :attr:`alone`): its properties time recoveries against
    #: bounds calibrated on a quiet machine.
    long: bool = False
    #: Needs the profile's extra CA certificates on the controller (skipped without).
    requires_ca: bool = False
    #: Its checks measure or judge a figure that another load on the machine
    #: changes (throughput, efficiency, bandwidth, a scan's arrivals): it
    #: runs only where nothing else loads the machine (see :attr:`alone`).
    judges_figures: bool = False
    #: Reads back everything the fault changes ({what: reading}), before it
    #: is injected and after it is reverted: equal readings prove the revert
    #: undid it exactly.  Only then may a property that passed on this
    #: cluster earlier in the session stand for its measurement after the
    #: revert (:func:`after_revert`); None: every failed check runs again.
    state: Callable[[FaultContext], dict[str, str]] | None = None
    #: Further regexes (as :attr:`message`) that some failure must match
    #: too: each check that meets the fault quotes its cause.
    more_messages: tuple[str, ...] = ()

    def expected_message(self, ctx: FaultContext) -> str:
        return self.message.format(n0=ctx.node(0), n1=ctx.node(1), user=ctx.training_user)

    def expected_messages(self, ctx: FaultContext) -> list[str]:
        """:attr:`message` and :attr:`more_messages`, with the node names in."""
        return [m.format(n0=ctx.node(0), n1=ctx.node(1), user=ctx.training_user)
                for m in (self.message, *self.more_messages)]

    @property
    def alone(self) -> bool:
        """Runs only on a machine nothing else loads: it judges a figure
        (images/sec, efficiency, busbw, a scan), or stops and starts nodes
        and times the recovery.  A busy machine delays a recovery past
        bounds calibrated on a quiet one: beside the fresh root, teardown
        and concurrency proofs, availability.kill_recovery_s measured 45.1 s
        against 30.2 alone (upper bound 40).  The others are judged by
        checks alone and may run beside other work (ci/test.sh's lanes)."""
        return self.judges_figures or self.long

    def read_state(self, ctx: FaultContext) -> dict[str, str] | None:
        """:attr:`state` read now, or None for a fault without one."""
        return self.state(ctx) if self.state is not None else None


#: The checks run after the revert of a fault whose properties are not
#: measured again: every node and cluster check (the main job's check
#: phase, pytest's -k matches the marker), so the nodes the fault stopped,
#: restarted or cut off are proven healthy as a whole; all but the two that
#: only read what is installed on disk (Horovod's check-build and Ansible's
#: become_user, 90 of the selection's 110 s on this machine), which neither
#: a stop, a start nor a partition changes and the state readings cover.
HEALTH_SELECTION = "check_phase and not test_horovod_build and not test_file_module_as_training_user"


def after_revert(failed: list[str], before: dict[str, str] | None, after: dict[str, str] | None,
                 passed_earlier: dict[str, str]) -> tuple[str, dict[str, str]]:
    """What runs after a fault's revert, and which failed properties are not
    measured again.

    ``failed`` are the test names that failed with the fault
    (``test_property[availability.recovery_s]``, ``test_node_count``);
    ``before``/``after`` the fault's state readings (None without
    :attr:`Fault.state`); ``passed_earlier`` maps property ids to the
    verdict they got on this cluster earlier in the session (pass or warn).
    Returns the pytest -k selection and {test name: why it stands}: a failed
    property stands when the revert restored the readings exactly and the
    property passed earlier, since the cluster is then in a state it was
    measured to pass in; the selection then adds :data:`HEALTH_SELECTION`
    to the failed checks.  Otherwise the selection is every failed test,
    as before.

    Raises:
        AssertionError: the readings after the revert differ from those
            before the fault (names what differs).
    """
    standing = {}
    if before is not None:
        after = after or {}
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        assert not changed, (
            "the revert did not restore what the fault changed: "
            + "; ".join(f"{k}: {before.get(k)!r} before, {after.get(k)!r} after" for k in changed))
        for name in failed:
            prop = property_id(name)
            if prop in passed_earlier:
                standing[name] = (f"{prop} passed (verdict {passed_earlier[prop]}) on this cluster earlier in the "
                                  "session, and the revert restored every reading of the fault's state")
    rest = [n for n in failed if n not in standing]
    if standing:
        return " or ".join([*rest, f"({HEALTH_SELECTION})"]), standing
    return " or ".join(rest), standing


def property_id(test_name: str) -> str:
    """``scaling.efficiency`` for ``test_property[scaling.efficiency]``; "" for other tests."""
    match = re.fullmatch(r"test_property\[(.+)\]", test_name)
    return match.group(1) if match else ""


def files_state(*paths: str, node: int | None = None):
    """State: mode, owner and sha256 of each of ``paths`` on node ``node``
    (index; None: every node), read out of band ("absent" for a missing file)."""
    def read(ctx: FaultContext) -> dict[str, str]:
        names = ctx.contract.node_names if node is None else [ctx.node(node)]
        out = {}
        for name in names:
            for path in paths:
                r = ctx.sh(name, f"if [ -e {path} ]; then stat -c '%a %u:%g' {path} && sha256sum < {path}; "
                                 "else echo absent; fi")
                out[f"{name}:{path}"] = " ".join(r.stdout.split())
        return out
    return read


def overrides_state(ctx: FaultContext) -> dict[str, str]:
    """State: the profile overrides the run's checks read (run.json)."""
    return {"overrides": json.dumps(RunDir.open(ctx.run_id).read_meta().get("overrides", {}), sort_keys=True)}


def _driver_state(ctx: FaultContext) -> dict[str, str]:
    """State: the cloud driver the checks' child pytest gets."""
    return {FAULT_DRIVER_ENV: os.environ.get(FAULT_DRIVER_ENV, "")}


def _states(*readers):
    """State: the union of ``readers``' readings."""
    def read(ctx: FaultContext) -> dict[str, str]:
        out: dict[str, str] = {}
        for reader in readers:
            out.update(reader(ctx))
        return out
    return read


def _backup(path: str) -> str:
    return f"cp -p {path} {path}.refarch-fault"


def _restore(path: str) -> str:
    return f"mv -f {path}.refarch-fault {path}"


_FIREWALL = ("add table inet refarch_fault; "
             "add chain inet refarch_fault input {{ type filter hook input priority 0; policy accept; }}; "
             "add rule inet refarch_fault input ct state established,related accept; "
             "add rule inet refarch_fault input ip saddr {cidr} tcp dport != 22 drop")


def _expect(**overrides):
    """Inject: the profile the run's checks read (``run.json`` overrides)
    expects more than the cluster has; the previous overrides are kept for
    the revert."""
    def inject(ctx: FaultContext) -> None:
        rd = RunDir.open(ctx.run_id)
        before = rd.read_meta().get("overrides", {})
        rd.update_meta(overrides={**before, **overrides}, overrides_before_fault=before)
    return inject


def _expect_revert(ctx: FaultContext) -> None:
    rd = RunDir.open(ctx.run_id)
    meta = rd.read_meta()
    meta["overrides"] = meta.pop("overrides_before_fault", meta.get("overrides", {}))
    rd.write_meta(meta)


def _rename_interface(old: str, new: str):
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
_WORKLOADS = "/opt/horovod/bin/tf2_synthetic_benchmark.py /opt/horovod/bin/digits_convergence.py"


def _no_gradient_averaging(ctx: FaultContext) -> None:
    """Inject: every node's training workloads use a plain GradientTape (no
    DistributedGradientTape, no allreduce of the gradients): each rank
    trains on its own gradients."""
    for node in ctx.contract.node_names:
        ctx.sh(node, f"for f in {_WORKLOADS}; do {_backup('$f')} && "
                     "sed -i -e 's/tape = hvd.DistributedGradientTape(tape)/pass  # refarch fault F10/'"
                     " -e 's/return \\[hvd.allreduce(g, op=hvd.Average) for g in grads\\]/return list(grads)"
                     "  # refarch fault F10/' $f; done")


def _gradient_averaging_back(ctx: FaultContext) -> None:
    for node in ctx.contract.node_names:
        ctx.sh(node, f"for f in {_WORKLOADS}; do {_restore('$f')}; done")


def _exposed_port(ctx: FaultContext) -> None:
    """Inject: a listener on 0.0.0.0:8099 on the second node, and a rule at
    the head of the run's network policy that admits TCP 8099 from
    anywhere (what a hand-edited security group does)."""
    table = ctx.contract.network_policy["table"]
    proc.run(["podman", "exec", "-d", ctx.container(ctx.node(1)), "python3", "-m", "http.server", "8099"], timeout_s=30)
    proc.run(["nft", "insert", "rule", "inet", table, "forward", "tcp", "dport", "8099", "accept",
              "comment", '"refarch-fault-exposed"'], timeout_s=30)


def _exposed_port_revert(ctx: FaultContext) -> None:
    _exposed_port_revert_rules(ctx)
    ctx.sh(ctx.node(1), "pkill -f 'http.server 8099'; sleep 1", check=False)


#: A UDP service that never answers (as rpcbind does not answer nmap's
#: probe of a wrong program): only the arrival counters can see it exposed.
_SILENT_UDP = ("import socket, time; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
               "s.bind(('0.0.0.0', {port})); time.sleep(86400)")


def _udp_exposed(port: int):
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


def _udp_exposed_revert(port: int):
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


def _both(*steps):
    """Inject or revert: each of ``steps`` in turn."""
    def apply(ctx: FaultContext) -> None:
        for step in steps:
            step(ctx)
    return apply


#: The busy neighbour of each run's fault case (refarch.judge.neighbour), by run id.
_NEIGHBOURS: dict[str, subprocess.Popen] = {}


def _busy_neighbour(ctx: FaultContext) -> None:
    """Inject: while the np=1 benchmark job runs on the first node, four busy
    loops share that node's CPU (refarch.judge.neighbour); the np=N job runs
    undisturbed, so np=1 alone is measured far slower than np=1 in rounds."""
    log = RunDir.open(ctx.run_id).logs / "neighbour.log"
    with open(log, "w", encoding="utf-8") as out:
        _NEIGHBOURS[ctx.run_id] = subprocess.Popen(
            [sys.executable, "-m", "refarch.judge.neighbour", ctx.container(ctx.node(0)), "--gloo -np 1", "4", "900"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _busy_neighbour_gone(ctx: FaultContext) -> None:
    watcher = _NEIGHBOURS.pop(ctx.run_id, None)
    if watcher is not None:
        watcher.terminate()  # it stops its busy loops as it exits
        watcher.wait(timeout=90)
    # Proven gone, not assumed: a loop its exit missed would slow every later
    # job on the node.
    mark = neighbour.mark_pattern()
    ctx.sh(ctx.node(0), f"pkill -f '{mark}'; sleep 1; if pgrep -af '{mark}'; then "
                        "echo 'busy loops of refarch.judge.neighbour still run' >&2; exit 1; fi")


def _neighbour_state(ctx: FaultContext) -> dict[str, str]:
    """State: how many busy loops of refarch.judge.neighbour run on the first node."""
    r = ctx.sh(ctx.node(0), f"pgrep -c -f '{neighbour.mark_pattern()}' || true")
    return {f"{ctx.node(0)}: busy loops": r.stdout.strip() or "0"}


def _firewall_state(ctx: FaultContext) -> dict[str, str]:
    """State: the whole nftables ruleset of the second node's network
    namespace (F2's firewall lives there)."""
    r = ctx.netns(ctx.node(1), "nft", "list", "ruleset")
    return {f"{ctx.node(1)}: nft list ruleset": r.stdout.strip()}


def _mount_state(ctx: FaultContext) -> dict[str, str]:
    """State: what is mounted at /shared on the second node, and how."""
    r = ctx.sh(ctx.node(1), "findmnt -n -o SOURCE,FSTYPE /shared || echo 'not mounted'")
    return {f"{ctx.node(1)}: /shared": r.stdout.strip()}


def _mtu_blackhole(largest: int):
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


def _home_state(ctx: FaultContext) -> dict[str, str]:
    """State: mode and owner of the training user's home on the second node."""
    r = ctx.sh(ctx.node(1), f"stat -c '%a %U:%G' /home/{ctx.training_user}")
    return {f"{ctx.node(1)}: /home/{ctx.training_user}": r.stdout.strip()}


#: The SSH session an sshfs mount of the share runs (``ssh ... -s -- user@server sftp``).
_SSHFS_SESSION = "^ssh .*@{server} sftp$"


def _no_sftp(ctx: FaultContext) -> None:
    """Inject: the share's server (first node) drops sshd's sftp subsystem
    (a hardening role turning it off), and the second node's sshfs loses
    its SSH session (SIGKILL), so its next access reconnects into the
    server without SFTP."""
    ctx.sh(ctx.node(0), _backup("/etc/ssh/sshd_config")
           + " && sed -i 's/^Subsystem/#Subsystem/' /etc/ssh/sshd_config && systemctl reload ssh")
    ctx.sh(ctx.node(1), f"pkill -9 -f '{_SSHFS_SESSION.format(server=ctx.node(0))}'; sleep 1", check=False)


def _sftp_back(ctx: FaultContext) -> None:
    """The server's sshd_config back; the second node's sshfs reconnects on
    its next access (option reconnect), proven by reading the share."""
    ctx.sh(ctx.node(0), _restore("/etc/ssh/sshd_config") + " && systemctl reload ssh")
    ctx.sh(ctx.node(1), f"for i in $(seq 15); do su - {ctx.training_user} -c 'ls -A /shared >/dev/null 2>&1' "
                        "&& exit 0; sleep 1; done; echo '/shared still unusable 15 s after sftp came back' >&2; exit 1")


_LAUNCHER = "/usr/local/bin/horovodrun-elastic"


def _stop_ignored(ctx: FaultContext) -> None:
    """The checks' child pytest gets a cloud driver whose stop does nothing
    (refarch.clouds.drivers.StopIgnored): set in this process's environment, which
    the child inherits."""
    os.environ[FAULT_DRIVER_ENV] = "stop-ignored"


def _stop_carried_out(ctx: FaultContext) -> None:
    os.environ.pop(FAULT_DRIVER_ENV, None)


def _no_cooldown(ctx: FaultContext) -> None:
    """Every node's elastic launcher loses --blacklist-cooldown-range:
    Horovod then blacklists a failed host for good."""
    for node in ctx.contract.node_names:
        ctx.sh(node, f"{_backup(_LAUNCHER)} && sed -i '/--blacklist-cooldown-range/d' {_LAUNCHER}")


def _cooldown_back(ctx: FaultContext) -> None:
    for node in ctx.contract.node_names:
        ctx.sh(node, _restore(_LAUNCHER))


#: The training user's SSH client settings that bound an elastic job's wait
#: on a silent node (the horovod role).
_SSH_ELASTIC = "/etc/ssh/ssh_config.d/60-horovod-elastic.conf"


def _no_ssh_alive(ctx: FaultContext) -> None:
    """Every node loses the SSH client settings that end a session to a
    node that stopped answering (OpenSSH's defaults come back)."""
    for node in ctx.contract.node_names:
        ctx.sh(node, f"{_backup(_SSH_ELASTIC)} && rm -f {_SSH_ELASTIC}")


def _ssh_alive_back(ctx: FaultContext) -> None:
    for node in ctx.contract.node_names:
        ctx.sh(node, _restore(_SSH_ELASTIC))


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


def _inject_tf(ctx: FaultContext) -> None:
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


def _revert_tf(ctx: FaultContext) -> None:
    """2.14.1 uninstalled, the node's own TensorFlow moved back."""
    ctx.sh(ctx.node(1), "/opt/horovod/bin/pip uninstall -q -y tensorflow-cpu")
    _tf_stash(ctx, "back")


FAULTS: tuple[Fault, ...] = (
    Fault("F1", "two nodes get the same hostname",
          inject=lambda c: c.sh(c.node(1), f"hostname {c.node(0)}"),
          revert=lambda c: c.sh(c.node(1), f"hostname {c.node(1)}"),
          checks="test_hostnames_unique", must_fail=("test_hostnames_unique",),
          message=r"duplicate hostnames: '{n0}' on {n0}, {n1}", source="FAULTS.md F1"),
    Fault("F2", "peers reach only TCP 22 (node firewall)",
          inject=lambda c: c.netns(c.node(1), "nft", _FIREWALL.format(cidr=c.contract.cluster_cidr)),
          revert=lambda c: c.netns(c.node(1), "nft", "delete table inet refarch_fault"),
          # After the revert, no probe listener may be left behind.
          checks="test_peer_ports_reachable or test_listening_sockets_allowed or communication",
          must_fail=("test_peer_ports_reachable[", "test_property[communication.busbw_to_tcp]"),
          message=r"{n0} -> {n1} \(\S+\) TCP \d+: timed out after 5 s", source="FAULTS.md F2",
          judges_figures=True, state=_firewall_state),
    Fault("F3", "the share's root-owned export: the training user cannot write",
          inject=lambda c: c.sh(c.node(0), "chown root:root /srv/shared && chmod 0755 /srv/shared"),
          revert=lambda c: c.sh(c.node(0), f"chown {c.training_user}:{c.training_user} /srv/shared && chmod 0775 /srv/shared"),
          checks="test_shared_storage_write_read_everywhere",
          must_fail=("test_shared_storage_write_read_everywhere[",),
          message=r"training user {user} cannot write /shared/\.refarch-check-", source="FAULTS.md F3"),
    Fault("F4", "one node gets another TensorFlow than Horovod was built against",
          inject=_inject_tf, revert=_revert_tf,
          checks="test_versions_consistent or test_horovod_build",
          must_fail=("test_versions_consistent", "test_horovod_build[{n1}]"),
          message=r"tensorflow-cpu: {n0}=2\.15\.1, {n1}=2\.14\.1", source="FAULTS.md F4"),
    Fault("F5", "a peer's host key is not pre-seeded",
          inject=lambda c: c.sh(c.node(0), _backup("/etc/ssh/ssh_known_hosts")
                                + f" && sed -i '/^{c.node(1)},/d' /etc/ssh/ssh_known_hosts"),
          revert=lambda c: c.sh(c.node(0), _restore("/etc/ssh/ssh_known_hosts")),
          checks="test_ssh_to_every_peer", must_fail=("test_ssh_to_every_peer[{n0}]",),
          message=r"{n0} -> {n1}: .*Host key verification failed", source="FAULTS.md F5"),
    Fault("F6", "PasswordAuthentication yes on one node",
          inject=lambda c: c.sh(c.node(1), "echo 'PasswordAuthentication yes' > /etc/ssh/sshd_config.d/00-fault.conf"
                                " && systemctl reload ssh"),
          revert=lambda c: c.sh(c.node(1), "rm -f /etc/ssh/sshd_config.d/00-fault.conf && systemctl reload ssh"),
          checks="test_sshd_effective_settings", must_fail=("test_sshd_effective_settings[{n1}]",),
          message=r"{n1}: sshd -T: passwordauthentication is 'yes', expected 'no'", source="FAULTS.md F6"),
    Fault("F7", "the cluster has fewer nodes than the profile expects",
          inject=_expect(**{"nodes.count": 3}), revert=_expect_revert,
          checks="test_node_count", must_fail=("test_node_count",),
          message=r"profile local expects 3 nodes, 2 answer \({n0}, {n1}\): missing node3",
          source="issue 13 F7"),
    Fault("F8", "sshd on one node drops concurrent unauthenticated logins (low MaxStartups)",
          inject=lambda c: c.sh(c.node(1), "echo 'MaxStartups 1:100:1' > /etc/ssh/sshd_config.d/00-fault-startups.conf"
                                " && systemctl reload ssh"),
          revert=lambda c: c.sh(c.node(1), "rm -f /etc/ssh/sshd_config.d/00-fault-startups.conf && systemctl reload ssh"),
          checks="test_ssh_burst_to_every_peer", must_fail=("test_ssh_burst_to_every_peer[{n0}]",),
          message=r"{n0} -> {n1}: \d+ of 3 concurrent logins dropped \(.+\); "
                  r"{n1}'s effective MaxStartups is 1:100:1 \(sshd -T\)",
          source="issue 13 F8"),
    Fault("F9", "Ansible cannot become the training user on one node (no setfacl: package acl missing)",
          inject=lambda c: c.sh(c.node(1), "mv /usr/bin/setfacl /root/setfacl.refarch-fault"),
          revert=lambda c: c.sh(c.node(1), "mv /root/setfacl.refarch-fault /usr/bin/setfacl"),
          checks="test_file_module_as_training_user", must_fail=("test_file_module_as_training_user[{n1}]",),
          message=r"{n1}: an Ansible file module cannot run as {user} \(become_user\): .*"
                  r"Failed to set permissions on the temporary files",
          source="issue 13 F9"),
    Fault("F10", "training without gradient averaging (DistributedGradientTape removed on every node)",
          inject=_no_gradient_averaging, revert=_gradient_averaging_back,
          checks="test_property and (ranks_diverged or efficiency)",
          must_fail=("test_property[convergence.ranks_diverged]",),
          must_warn=("scaling.efficiency",), judges_figures=True, state=files_state(*_WORKLOADS.split()),
          message=r"convergence\.ranks_diverged = 1 ranks \(after training, the weights of rank 1 on {n1} differ "
                  r"from rank 0's on {n0}: the ranks did not average their gradients\) is above the upper bound 0",
          source="issue 13 F10"),
    Fault("busy-neighbour", "the machine is busy while np=1 is measured (four busy loops share the first node's "
                            "CPU during the np=1 job, as other jobs on a shared CI runner do)",
          inject=_busy_neighbour, revert=_busy_neighbour_gone, state=_neighbour_state,
          checks="test_training_single_rank or efficiency",
          must_fail=("test_property[scaling.efficiency]",),
          must_pass=("test_training_single_rank",), judges_figures=True,
          message=r"scaling\.efficiency = [\d.]+ ratio .* cannot be judged \(an error, never a pass\): np=1 "
                  r"measured [\d.]+ \([\d.-]+\) images/sec alone and [\d.]+ \([\d.-]+\) in rounds beside np=2",
          source="issue 24: figures a busy machine cannot fool (np=1 15.9 against 37-39 images/sec: 136 %)"),
    Fault("F11", "the profile expects Horovod with PyTorch; the build has TensorFlow only",
          inject=_expect(**{"expect.horovod_build.frameworks": ["TensorFlow", "PyTorch"]}), revert=_expect_revert,
          checks="test_horovod_build", must_fail=("test_horovod_build[{n0}]", "test_horovod_build[{n1}]"),
          message=r"{n0}: .*horovod\.torch\.mpi_lib_v2 \(PyTorch\) does not import: "
                  r"ModuleNotFoundError: No module named 'horovod\.torch\.mpi_lib_v2'",
          source="issue 13 F11"),
    Fault("F12", "one node unreachable over SSH (sshd moved to port 2222)",
          inject=lambda c: c.sh(c.node(1), "echo 'Port 2222' > /etc/ssh/sshd_config.d/00-fault-port.conf"
                                " && systemctl restart ssh"),
          revert=lambda c: c.sh(c.node(1), "rm -f /etc/ssh/sshd_config.d/00-fault-port.conf && systemctl restart ssh"),
          checks="test_node_reachable or test_sshd_effective_settings or test_hostnames_unique",
          must_fail=("test_node_reachable[{n1}]",),
          must_skip=("test_sshd_effective_settings[{n1}]", "test_hostnames_unique"),
          message=r"{n1} \(\S+:22\): connection refused", source="issue 13 F12"),
    Fault("F13", "orted is not on the non-interactive PATH of one node",
          inject=lambda c: c.sh(c.node(1), "mv /usr/bin/orted /root/orted.refarch-fault"),
          revert=lambda c: c.sh(c.node(1), "mv /root/orted.refarch-fault /usr/bin/orted"),
          checks="test_mpirun_across_all_nodes", must_fail=("test_mpirun_across_all_nodes",),
          message=r"mpirun from {n0} failed \(exit \d+\): .*orted: command not found; "
                  r"orted is not on the non-interactive PATH of {n1} \(full output: ",
          source="issue 13 F13"),
    Fault("F14", "the cluster interface has another name on one node (eth0 renamed ens3)",
          inject=_rename_interface("eth0", "ens3"), revert=_rename_interface("ens3", "eth0"),
          checks="test_interface_pinned or test_training_single_rank or test_training_on_all_nodes",
          must_fail=("test_interface_pinned[{n1}]", "test_training_on_all_nodes"),
          must_pass=("test_training_single_rank",),
          message=r"not launched: Horovod would be pinned to eth0: {n1}: interface eth0 does not carry its "
                  r"cluster address \S+ \(its cluster interface is ens3\)",
          source="issue 13 F14"),
    Fault("exposed-port", "a listener on 0.0.0.0 on one node, and a policy rule that admits it from anywhere",
          inject=_exposed_port, revert=_exposed_port_revert,
          checks="test_property and exposure", judges_figures=True,
          must_fail=("test_property[exposure.outside_open_ports]", "test_property[exposure.admin_unexpected_ports]"),
          must_pass=("test_property[exposure.password_auth_nodes]",),
          message=r"exposure\.outside_open_ports = 1 ports \(outside probe \S+: {n1} \S+ tcp/8099 open\) "
                  r"is above the upper bound 0",
          source="issue 7, security exposure"),
    Fault("udp-exposed", "a UDP service on 0.0.0.0:111 of one node that answers nothing, and a policy rule that "
                         "admits udp/111 from anywhere (rpcbind exposed)",
          inject=_udp_exposed(111), revert=_udp_exposed_revert(111),
          checks="test_property and exposure", judges_figures=True,
          must_fail=("test_property[exposure.outside_open_ports]", "test_property[exposure.admin_unexpected_ports]"),
          must_pass=("test_property[exposure.password_auth_nodes]",),
          message=r"exposure\.outside_open_ports = 1 ports \(outside probe \S+: {n1} \S+ udp/111 open\) "
                  r"is above the upper bound 0",
          source="issue 18: exposure of every UDP port"),
    Fault("not-mounted-at-boot", "the share is mounted by hand but not listed in /etc/fstab on one node",
          inject=lambda c: c.sh(c.node(1), _backup("/etc/fstab") + r" && sed -i 's|^\(.* /shared .*\)$|#\1|' /etc/fstab"),
          revert=lambda c: c.sh(c.node(1), _restore("/etc/fstab") + " && (mountpoint -q /shared || mount /shared)"),
          checks="test_property and restart_healthy", long=True,
          state=_states(files_state("/etc/fstab", node=1), _mount_state),
          must_fail=("test_property[availability.restart_healthy_s]",),
          message=r"{n1} healthy after [\d.]+ s, but checks fail after its restart \(without Ansible\): "
                  r".*test_shared_storage_mounted\[{n1}\]: (AssertionError: )?{n1}: nothing mounted at /shared",
          source="issue 7, node restart"),
    Fault("stop-ignored", "the cloud accepts a stop and the node keeps running (an OpenStack server that stays "
                          "ACTIVE after a stop call)",
          inject=_stop_ignored, revert=_stop_carried_out,
          checks="test_property and (restart_healthy or availability.recovery_s)", long=True, state=_driver_state,
          must_fail=("test_property[availability.restart_healthy_s]", "test_property[availability.recovery_s]"),
          message=r"{n1} still answers SSH from {n0} \(cloud state running\) 30 s after stop_node returned: "
                  r"the node was never down",
          source="issue 18: availability by a real failure"),
    Fault("no-cooldown", "elastic Horovod without a blacklist cooldown: a stopped node never rejoins",
          inject=_both(_no_cooldown, _expect(**{"availability.step_timeout_s": 75})),
          revert=_both(_cooldown_back, _expect_revert),
          checks="test_property and (availability.recovery_s or availability.rejoin_s)", long=True,
          state=_states(files_state(_LAUNCHER), overrides_state),
          must_fail=("test_property[availability.rejoin_s]",),
          must_pass=("test_property[availability.recovery_s]",),
          message=r"elastic job back at world size 2 after {n1} was started again: not within 75 s",
          source="issue 7, availability (measured by hand: never rejoined in 200 s)"),
    Fault("no-ssh-alive", "the bounding settings reverted: the training user's SSH keeps a session to a silent "
                          "node open (OpenSSH's defaults), so the elastic driver never takes a cut-off node as failed",
          inject=_both(_no_ssh_alive, _expect(**{"availability.step_timeout_s": 50})),
          revert=_both(_ssh_alive_back, _expect_revert),
          checks="test_ssh_gives_up_on_a_silent_peer or availability.partition_recovery_s", long=True,
          state=_states(files_state(_SSH_ELASTIC), overrides_state),
          must_fail=("test_ssh_gives_up_on_a_silent_peer[{n0}]", "test_property[availability.partition_recovery_s]"),
          message=r"elastic job goes on at world size 1 after {n1} was cut off: not within 50 s: .*the elastic "
                  r"driver on {n0} still waits on its SSH session to {n1}",
          source="issue 25, availability under partition (measured: never went on within 240 s)"),
    Fault("F18", "packets above 1400 bytes between two nodes vanish (path MTU blackhole of an overlay network)",
          inject=_mtu_blackhole(1400),
          revert=lambda c: c.netns(c.node(1), "nft", "delete table inet refarch_fault_mtu"),
          state=_firewall_state,
          checks="test_network_path_to_every_peer or test_ssh_to_every_peer or test_mpirun_across_all_nodes "
                 "or test_shared_storage",
          must_fail=("test_network_path_to_every_peer[{n0}]", "test_network_path_to_every_peer[{n1}]",
                     "test_ssh_to_every_peer[{n0}]", "test_mpirun_across_all_nodes",
                     "test_shared_storage_mounted[{n1}]"),
          message=r"{n0} -> {n1} \(\S+\): packets above 1400 bytes vanish \(path MTU blackhole\): the largest "
                  r"don't-fragment ping that passes is 1372 bytes of payload, below \S+'s MTU 1500",
          more_messages=(r"SSH between nodes failed: not tried: {n0} -> {n1} \(\S+\): packets above 1400 bytes vanish",
                         r"mpirun from {n0} across 2 nodes not launched: network path: {n0} -> {n1} \(\S+\): "
                         r"packets above 1400 bytes vanish",
                         r"{n1}: /shared not read: {n1} -> {n0} \(\S+\): packets above 1400 bytes vanish"),
          source="FAULTS.md F18 (by hand on main: six checks timed out after 7 min 52 s, the cause unnamed)"),
    Fault("F19", "the training user's home is writable by others on one node (sshd's StrictModes refuses its key)",
          inject=lambda c: c.sh(c.node(1), f"chmod 0777 /home/{c.training_user}"),
          revert=lambda c: c.sh(c.node(1), f"chmod 0755 /home/{c.training_user}"),
          state=_home_state,
          checks="test_ssh_to_every_peer or test_ssh_burst_to_every_peer or test_mpirun_across_all_nodes",
          must_fail=("test_ssh_to_every_peer[{n0}]", "test_ssh_burst_to_every_peer[{n0}]",
                     "test_mpirun_across_all_nodes"),
          message=r"SSH between nodes failed: {n0} -> {n1}: {user}@{n1}: Permission denied \(publickey\)\.; "
                  r"{n1}'s sshd: Authentication refused: bad ownership or modes for directory /home/{user}",
          more_messages=(r"{n0} -> {n1}: a single login fails too, not a concurrency limit: .*Permission denied.*; "
                         r"{n1}'s sshd: Authentication refused: bad ownership or modes for directory /home/{user}",
                         r"mpirun from {n0} failed \(exit \d+\): .*Permission denied.*; {n1}'s sshd: Authentication "
                         r"refused: bad ownership or modes for directory /home/{user}"),
          source="FAULTS.md F19 (by hand on main: 'Permission denied (publickey)', the burst check blamed "
                 "MaxStartups, mpirun dumped a CommandResult)"),
    Fault("F20", "the share's server drops sshd's sftp subsystem; the other node's sshfs reconnects into it",
          inject=_no_sftp, revert=_sftp_back,
          state=_states(files_state("/etc/ssh/sshd_config", node=0), _mount_state),
          checks="test_shared_storage", must_fail=("test_shared_storage_write_read_everywhere[{n1}]",),
          message=r"{n1}: training user {user} cannot write /shared/\.refarch-check-{n1}: .*Input/output error; "
                  r"{n0} \(the share's server\): its sshd offers no sftp subsystem \(sshd -T lists no Subsystem\); "
                  r"{n1}'s sshfs has no SSH session to {n0} \(its reconnects fail\)",
          source="FAULTS.md F20 (by hand on main: 'Input/output error' on every check, the server unnamed)"),
    Fault("uid", "the training user has another uid on one node",
          inject=lambda c: c.sh(c.node(1), f"usermod -u 2999 {c.training_user}"),
          revert=lambda c: c.sh(c.node(1), f"usermod -u 2001 {c.training_user}"),
          checks="test_training_user", must_fail=("test_training_user[{n1}]", "test_training_user_uid_consistent"),
          message=r"{n1}: {user} has uid 2999, expected 2001"),
    Fault("unmounted", "the share is not mounted on one node",
          inject=lambda c: c.sh(c.node(1), "umount -l /shared"),
          revert=lambda c: c.sh(c.node(1), "mount /shared"),
          checks="test_shared_storage_mounted", must_fail=("test_shared_storage_mounted[{n1}]",),
          message=r"{n1}: nothing mounted at /shared"),
    Fault("dead-mount", "the share's sshfs process died on one node (still listed as mounted)",
          inject=lambda c: c.sh(c.node(1), "pkill -9 -f '[s]shfs .* /shared'; sleep 1"),
          revert=lambda c: c.sh(c.node(1), "umount -l /shared; mount /shared"),
          checks="test_shared_storage_mounted", must_fail=("test_shared_storage_mounted[{n1}]",),
          message=r"{n1}: /shared is mounted \(fuse\.sshfs\) but unusable: .*Transport endpoint is not connected",
          source="issue 13, other defects"),
    Fault("horovod-broken", "Horovod cannot load MPI on one node",
          inject=lambda c: c.sh(c.node(1), "mv /usr/lib/x86_64-linux-gnu/libmpi.so.40 /root/"),
          revert=lambda c: c.sh(c.node(1), "mv /root/libmpi.so.40 /usr/lib/x86_64-linux-gnu/"),
          checks="test_horovod_build", must_fail=("test_horovod_build[{n1}]",),
          message=r"{n1}: (horovodrun --check-build failed|Horovod lacks)"),
    Fault("mpirun-hostfile", "the MPI hostfile gives one node the other node's slot",
          inject=lambda c: c.sh(c.node(0), _backup("/etc/openmpi/cluster-hostfile")
                                + f" && sed -i -e '/^{c.node(1)} /d' -e 's/^{c.node(0)} slots=1/{c.node(0)} slots=2/'"
                                " /etc/openmpi/cluster-hostfile"),
          revert=lambda c: c.sh(c.node(0), _restore("/etc/openmpi/cluster-hostfile")),
          checks="test_mpirun_across_all_nodes", must_fail=("test_mpirun_across_all_nodes",),
          message=r"expected each of \['{n0}', '{n1}'\] once, got \['{n0}', '{n0}'\]"),
    Fault("name-resolution", "a node resolves a peer to a wrong address",
          inject=lambda c: c.sh(c.node(0), _backup("/etc/hosts")
                                + f" && sed -i 's/^.* {c.node(1)}$/192.0.2.99 {c.node(1)}/' /etc/hosts"),
          revert=lambda c: c.sh(c.node(0), _restore("/etc/hosts")),
          checks="test_resolves_every_peer", must_fail=("test_resolves_every_peer[{n0}]",),
          message=r"{n0} resolves: {n1} -> 192\.0\.2\.99"),
    Fault("time", "chrony is stopped on one node",
          inject=lambda c: c.sh(c.node(1), "systemctl stop chrony"),
          revert=lambda c: c.sh(c.node(1), "systemctl start chrony && for i in $(seq 30); do "
                                "chronyc -n tracking | grep -q 'Leap status *: Normal' && break; sleep 1; done"),
          checks="test_time_synchronised", must_fail=("test_time_synchronised[{n1}]",),
          message=r"{n1}: time: chrony is inactive/dead \(result success\); chronyc: .*(chronyd|Cannot talk)"),
    Fault("interface-pin", "Horovod is pinned to the wrong interface on one node",
          inject=lambda c: c.sh(c.node(1), _backup("/etc/profile.d/horovod.sh")
                                + " && sed -i 's/^export REFARCH_CLUSTER_IFACE=.*/export REFARCH_CLUSTER_IFACE=\"lo\"/'"
                                " /etc/profile.d/horovod.sh"),
          revert=lambda c: c.sh(c.node(1), _restore("/etc/profile.d/horovod.sh")),
          checks="test_interface_pinned", must_fail=("test_interface_pinned[{n1}]",),
          message=r"{n1}: cluster interface is \S+, but REFARCH_CLUSTER_IFACE=lo"),
    Fault("extra-listener", "a stray service listens on one node",
          inject=lambda c: proc.run(["podman", "exec", "-d", c.container(c.node(1)), "python3", "-m", "http.server",
                                     "8099"], timeout_s=30),
          revert=lambda c: c.sh(c.node(1), "pkill -f 'http.server 8099'; sleep 1", check=False),
          checks="test_listening_sockets_allowed", must_fail=("test_listening_sockets_allowed[{n1}]",),
          message=r"{n1}: listening beyond the allow-list .*tcp/8099"),
    Fault("ca-untrusted", "the extra CA certificates are gone from one node's bundle (pip would fail TLS)",
          inject=lambda c: c.sh(c.node(1), "mkdir -p /root/.refarch-ca && mv /usr/local/share/ca-certificates/refarch-*"
                                " /root/.refarch-ca/ && update-ca-certificates --fresh >/dev/null"),
          revert=lambda c: c.sh(c.node(1), "mv /root/.refarch-ca/* /usr/local/share/ca-certificates/ &&"
                                " update-ca-certificates --fresh >/dev/null"),
          checks="test_extra_ca_certificates_trusted", must_fail=("test_extra_ca_certificates_trusted[{n1}]",),
          message=r"{n1}: /etc/ssl/certs/ca-certificates.crt lacks the extra CA certificates \['/", requires_ca=True),
)


def by_id(fault_id: str) -> Fault:
    """The fault case named ``fault_id``.

    Raises:
        KeyError: no such fault.
    """
    for fault in FAULTS:
        if fault.id == fault_id:
            return fault
    raise KeyError(fault_id)
