"""Node checks: pytest-testinfra over SSH, one test per node.

Every expectation comes from the profile; every failure names the node.
"""

import shlex
from pathlib import Path

import pytest

from refarch import headroom
from refarch.judge import causes, checks
from refarch.pytest.hosts import HOROVOD_PYTHON, probe_ssh, run_as, timed_out
from refarch.tools import ansible

pytestmark = [pytest.mark.integration, pytest.mark.check_phase]


def test_node_reachable(node_name, cluster, run_state):
    """The node answers SSH on a fresh connection (an unreachable node is
    one failure here; its other checks are reported as not run)."""
    why = probe_ssh(cluster, run_state, node_name)
    assert not why, why


def test_sshd_effective_settings(fresh_node, node_name, profile):
    """The effective sshd configuration (`sshd -T`) has the hardening the
    profile expects (no password or keyboard-interactive login, ...); asked
    over a new connection, so the answer comes from the sshd running now."""
    with fresh_node.sudo():
        out = fresh_node.check_output("/usr/sbin/sshd -T")
    problems = checks.sshd_violations(checks.parse_sshd_t(out), profile.expect.sshd)
    assert not problems, f"{node_name}: sshd -T: " + "; ".join(problems)


def test_training_user(node, node_name, profile):
    """The training user exists with the profile's uid (same on every node)."""
    want = profile.training_user
    user = node.user(want.name)
    assert user.exists, f"{node_name}: training user {want.name} does not exist"
    assert user.uid == want.uid, f"{node_name}: {want.name} has uid {user.uid}, expected {want.uid}"


def test_network_path_to_every_peer(node, node_name, cluster, hosts):
    """The cluster network carries full-size packets to every peer: small
    pings arrive (at most 5 % of 20 lost) and a don't-fragment ping of the
    interface's MTU passes; otherwise the largest size that passes is named
    (an overlay network with a smaller path MTU drops larger packets
    silently: SSH, MPI and the share then hang while small pings pass;
    F18).  The other checks on a pair quote this as their cause."""
    names = cluster.contract.node_names
    # Every node's paths at once on the first node's turn (in parallel);
    # each node's own check judges its own.
    causes.warm_paths(cluster, hosts, [(a, b) for a in names for b in names if a != b])
    problems = causes.path_problems(cluster, hosts, [(node_name, p) for p in names if p != node_name])
    assert not problems, "network path: " + "; ".join(problems)


def test_ssh_to_every_peer(node, node_name, profile, cluster, hosts):
    """As the training user, SSH to every other node by name works with
    BatchMode (no prompt) and strict host key checking (seeded host keys).
    A refused login quotes the target sshd's own reason from its journal;
    a pair whose network path is faulty is not tried (its cause is quoted)."""
    failures = []
    for peer in cluster.contract.node_names:
        if peer == node_name:
            continue
        path = causes.path_problem(cluster, hosts, node_name, peer)
        if path:
            failures.append(f"not tried: {path}")
            continue
        since = causes.clock(hosts[peer])
        # ssh's own exit status is printed, not returned: testinfra takes an
        # exit status of 255 for a failure of its own connection.
        r = run_as(node, profile.training_user.name,
                   f"ssh -o BatchMode=yes -o StrictHostKeyChecking=yes -o ConnectTimeout=10 {peer} hostname 2>&1;"
                   " echo REFARCH_RC=$?", timeout_s=30)
        lines = r.stdout.strip().splitlines() or [""]
        if r.rc != 0 or lines[-1] != "REFARCH_RC=0" or lines[:1] != [peer]:
            detail = " ".join(line for line in lines if not line.startswith("REFARCH_RC")) or f"exit {r.rc}"
            reason = causes.login_refusal(hosts, cluster, node_name, peer, since, profile.training_user.name)
            failures.append(f"{node_name} -> {peer}: {detail.strip()[-200:]}" + (f"; {reason}" if reason else ""))
    assert not failures, "SSH between nodes failed: " + "; ".join(failures)


def test_ssh_gives_up_on_a_silent_peer(node, node_name, profile, cluster):
    """The training user's SSH (Horovod launches every remote worker over
    it) ends a session whose other side stopped answering and bounds its
    connects (``ssh -G``: ServerAliveInterval > 0, ConnectTimeout set): the
    elastic driver takes a host as failed only when that session ends, so
    without them a job waits for hours on a node powered off or cut off."""
    peers = [p for p in cluster.contract.node_names if p != node_name] or [node_name]
    r = run_as(node, profile.training_user.name, f"ssh -G {peers[0]}", timeout_s=30)
    settings = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
    interval, count = int(settings.get("serveraliveinterval", 0)), int(settings.get("serveralivecountmax", 3))
    assert interval > 0, (f"{node_name}: {profile.training_user.name}'s SSH to {peers[0]} never gives up on a silent "
                          "peer (ServerAliveInterval 0): an elastic job waits for hours on a node powered off or "
                          "cut off by the network")
    assert settings.get("connecttimeout", "none") != "none", (
        f"{node_name}: {profile.training_user.name}'s SSH to {peers[0]} has no ConnectTimeout: a launch to a node "
        "still cut off hangs on TCP's own retries")
    assert interval * count <= 60, (f"{node_name}: SSH gives up on a silent peer only after {interval * count} s "
                                    f"(ServerAliveInterval {interval} x ServerAliveCountMax {count})")


#: Opens N BatchMode logins at once to a peer; prints one line per failed one.
BURST = ("for i in $(seq {n}); do (ssh -o BatchMode=yes -o ControlMaster=no -o ControlPath=none"
         " -o ConnectTimeout=10 {peer} true >/dev/null 2>/tmp/.refarch-burst-$i || sed -n 1p /tmp/.refarch-burst-$i)"
         " & done; wait; rm -f /tmp/.refarch-burst-*")


def test_ssh_burst_to_every_peer(node, node_name, profile, cluster, hosts):
    """Launchers (mpirun, horovodrun) open many SSH logins to a node at once:
    (ranks per node + 2) concurrent BatchMode logins to every peer all
    succeed (a low sshd MaxStartups drops some at random).  Drops are blamed
    on concurrency only when a single login works; otherwise the single
    login's failure and the target sshd's reason are quoted."""
    n = max(profile.expect.gpus_per_node, 1) + 2
    failures = []
    for peer in cluster.contract.node_names:
        if peer == node_name:
            continue
        path = causes.path_problem(cluster, hosts, node_name, peer)
        if path:
            failures.append(f"not tried: {path}")
            continue
        since = causes.clock(hosts[peer])
        r = run_as(node, profile.training_user.name, BURST.format(n=n, peer=peer), timeout_s=60)
        dropped = [line for line in r.stdout.splitlines() if line.strip()]
        if not dropped:
            continue
        single = run_as(node, profile.training_user.name,
                        f"ssh -o BatchMode=yes -o ConnectTimeout=10 {peer} true 2>&1", timeout_s=30)
        if single.rc != 0:
            reason = causes.login_refusal(hosts, cluster, node_name, peer, since, profile.training_user.name)
            failures.append(f"{node_name} -> {peer}: a single login fails too, not a concurrency limit: "
                            f"{(single.stdout.strip().splitlines() or [f'exit {single.rc}'])[-1][:160]}"
                            + (f"; {reason}" if reason else ""))
            continue
        with hosts[peer].sudo():
            setting = checks.parse_sshd_t(hosts[peer].check_output("/usr/sbin/sshd -T")).get("maxstartups", "?")
        setting = " ".join(setting) if isinstance(setting, list) else setting
        failures.append(f"{node_name} -> {peer}: {len(dropped)} of {n} concurrent logins dropped "
                        f"({dropped[0].strip()[:120]}); {peer}'s effective MaxStartups is {setting} (sshd -T)")
    assert not failures, "; ".join(failures)


def test_shared_storage_mounted(node, node_name, profile, cluster, hosts):
    """The shared storage is mounted with the profile's type and options
    (rw everywhere; for NFS also `hard` and the pinned version), and can be
    read within 15 s (a dead FUSE or NFS mount is still listed as mounted).
    An unusable share names the server's side (F20)."""
    want = profile.shared_storage
    mp = node.mount_point(want.mount_point)
    assert mp.exists, f"{node_name}: nothing mounted at {want.mount_point}"
    fstype = "fuse.sshfs" if want.type == "sshfs" else want.type
    assert mp.filesystem.startswith(fstype), f"{node_name}: {want.mount_point} is {mp.filesystem}, expected {fstype}"
    missing = [opt for opt in want.required_mount_options if opt not in mp.options]
    assert not missing, (f"{node_name}: {want.mount_point} lacks mount options {missing} "
                         f"(has {','.join(mp.options)})")
    path = _path_to_share_server(cluster, hosts, node_name)
    if path:
        pytest.fail(f"{node_name}: {want.mount_point} not read: {path}")
    # Listed is not usable: a dead FUSE or NFS mount stays in the mount table.
    r = run_as(node, profile.training_user.name, f"ls -A {want.mount_point} > /dev/null", timeout_s=15)
    if r.rc != 0:
        why = "reading it hung for 15 s" if r.rc == 124 else (r.stderr.strip().splitlines() or [f"exit {r.rc}"])[-1]
        pytest.fail(f"{node_name}: {want.mount_point} is mounted ({mp.filesystem}) but unusable: {why}"
                    + _share_causes(cluster, hosts, profile, node_name))


def _path_to_share_server(cluster, hosts, node_name: str) -> str:
    """The root cause on the network path between ``node_name`` and the
    share's server, either way ("" when healthy or it is the server)."""
    server = cluster.contract.shared_storage["server"]
    if node_name == server or server not in hosts:
        return ""
    return "; ".join(causes.path_problems(cluster, hosts, [(node_name, server), (server, node_name)]))


def _share_causes(cluster, hosts, profile, node_name: str) -> str:
    """``"; <the server's side>; <the client's side>"`` for a share that
    failed on ``node_name``, "" when neither side names a cause."""
    server = cluster.contract.shared_storage["server"]
    found = []
    if server in hosts:
        found.append(causes.share_server_problem(hosts[server], server, profile.shared_storage.type,
                                                 profile.shared_storage.export))
    if profile.shared_storage.type == "sshfs" and node_name != server:
        found.append(causes.sshfs_client_state(hosts[node_name], node_name, server))
    return "".join(f"; {f}" for f in found if f)


def test_shared_storage_write_read_everywhere(node, node_name, profile, hosts, cluster):
    """64 KiB of random bytes the training user writes on this node read back
    with the same sha256 on every other node."""
    user = profile.training_user.name
    path = f"{profile.shared_storage.mount_point}/.refarch-check-{node_name}"
    cut = [p for p in (_path_to_share_server(cluster, hosts, n) for n in hosts) if p]
    if cut:
        pytest.fail(f"file not written on {node_name} at {path}: " + "; ".join(dict.fromkeys(cut)))
    w = run_as(node, user, f"head -c 65536 /dev/urandom > {path} && sync && sha256sum < {path}", timeout_s=30)
    if w.rc != 0:
        # The last line is the shell's error (sudo may warn before it).
        pytest.fail(f"{node_name}: training user {user} cannot write {path}: "
                    f"{(w.stderr.strip().splitlines() or [f'exit {w.rc}'])[-1]}"
                    + _share_causes(cluster, hosts, profile, node_name))
    digest = w.stdout.split()[0]
    failures = []
    owners = {node_name: _owner(node, user, path)}
    for peer, host in hosts.items():
        if peer == node_name:
            continue
        r = run_as(host, user, f"sha256sum < {path}", timeout_s=30)
        if r.rc != 0 or r.stdout.split()[:1] != [digest]:
            failures.append(f"{peer} reads other bytes (exit {r.rc}: {(r.stderr or r.stdout).strip()[:80]})"
                            + _share_causes(cluster, hosts, profile, peer))
        else:
            owners[peer] = _owner(host, user, path)
    server = cluster.contract.shared_storage["server"]
    if server in hosts:
        exported = f"{profile.shared_storage.export}/.refarch-check-{node_name}"
        with hosts[server].sudo():
            owners[f"{server}:{profile.shared_storage.export}"] = hosts[server].run(
                f"stat -c '%u:%g %U:%G' {exported}").stdout.strip()
    run_as(node, user, f"rm -f {path}", timeout_s=30)
    if not failures and len(set(owners.values())) > 1:
        # NFSv4 sends owners as names: nodes in other idmapd domains map
        # them to nobody (F22).
        domains = {}
        if profile.shared_storage.type == "nfs":
            for name, host in hosts.items():
                with host.sudo():
                    domains[name] = host.run("nfsidmap -d").stdout.strip()
        failures.append(causes.owner_problem(owners, domains))
    assert not failures, f"file written on {node_name} at {path}: " + "; ".join(failures)


def _owner(host, user: str, path: str) -> str:
    """``"2001:2001 hvd:hvd"``: uid:gid and names of ``path`` as ``user`` sees it."""
    return run_as(host, user, f"stat -c '%u:%g %U:%G' {path}", timeout_s=30).stdout.strip()


def test_shared_storage_root_squashed(node, node_name, profile):
    """Where the profile says the export squashes root, root on a node
    cannot write to the share."""
    want = profile.shared_storage
    if not want.root_squash:
        pytest.skip(f"profile {profile.name}: {want.type} share is not root-squashed")
    with node.sudo():
        r = node.run(f"timeout 30 touch {want.mount_point}/.refarch-root-{node_name}")
        node.run(f"rm -f {want.mount_point}/.refarch-root-{node_name}")
    assert r.rc != 0, f"{node_name}: root can write to {want.mount_point} (export is not root-squashed)"


def test_extra_ca_certificates_trusted(node, node_name, cluster):
    """Every extra CA certificate of the profile (the controller's files,
    e.g. an institutional TLS proxy's) is in the node's system bundle, and
    pip is pointed at that bundle (pip ships its own otherwise)."""
    files = cluster.ca_files()
    if not files:
        pytest.skip("the profile names no extra CA certificates")
    bundle = node.file("/etc/ssl/certs/ca-certificates.crt").content_string
    missing = checks.untrusted_certificates(bundle, {f: Path(f).read_text() for f in files})
    assert not missing, f"{node_name}: /etc/ssl/certs/ca-certificates.crt lacks the extra CA certificates {missing}"
    pip_conf = node.file("/etc/pip.conf")
    assert pip_conf.exists and "/etc/ssl/certs/ca-certificates.crt" in pip_conf.content_string, (
        f"{node_name}: /etc/pip.conf does not point pip at the system CA bundle")


def test_resolves_every_peer(node, node_name, cluster):
    """Every node's name resolves, on this node, to its cluster address."""
    wrong = []
    for peer in cluster.contract.nodes:
        r = node.run(f"getent ahostsv4 {peer.name}")
        got = r.stdout.split()[0] if r.rc == 0 and r.stdout.split() else None
        if got != peer.address:
            wrong.append(f"{peer.name} -> {got or 'unresolved'} (expected {peer.address})")
    assert not wrong, f"{node_name} resolves: " + "; ".join(wrong)


def test_resource_headroom(node, node_name, profile, cluster, hosts):
    """Before any job the node has what the profile's workloads need
    (refarch.headroom): the training user's limits as a login over SSH from
    the first node gets them, the memory its machine and cgroup can still
    give, the CPUs its quota allows, and free space and inodes in /tmp, on
    the shared mount and in the home directory."""
    need, user = profile.expect.headroom, profile.training_user.name
    first = cluster.contract.node_names[0]
    wrong = []
    r = run_as(hosts[first], user, f"ssh -o BatchMode=yes -o ConnectTimeout=10 {node_name} {shlex.quote(headroom.LIMITS)}",
               timeout_s=30)
    try:
        wrong += headroom.limit_problems(headroom.parse_limits(r.stdout), need, user)
    except ValueError as exc:
        wrong.append(f"limits of {user} over SSH from {first} not read: {exc}")
    home = run_as(node, user, 'echo "$HOME"', timeout_s=30).stdout.strip()
    paths = {"/tmp": "/tmp", "shared mount": cluster.contract.shared_storage["mount_point"], "home": home}
    with node.sudo():
        probe = node.run(f"sh -c {shlex.quote(headroom.PROBE)} probe " + " ".join(shlex.quote(p) for p in paths.values()))
    readings = headroom.parse_probe(probe.stdout)
    ranks = max(1, profile.expect.gpus_per_node)
    workload, rank_mib = max(need.rank_memory_mib.items(), key=lambda kv: kv[1], default=("none", 0))
    wrong += [p for p in (
        headroom.memory_problem(readings, ranks * rank_mib + need.reserve_memory_mib,
                                f"{ranks} rank x {rank_mib} MiB resident ({workload}) + {need.reserve_memory_mib} "
                                "MiB reserve"),
        headroom.cpu_problem(readings, ranks * profile.smoke.intra_op_threads,
                             f"{ranks} rank x {profile.smoke.intra_op_threads} intra-op thread"),
    ) if p]
    wrong += headroom.disk_problems(readings, paths, need)
    assert not wrong, f"{node_name}: " + "; ".join(wrong)


def test_time_synchronised(node, node_name, profile):
    """chrony is synchronised and the clock offset is under the profile's bound."""
    r = node.run("chronyc -n tracking")
    problems = checks.chrony_problems(checks.parse_chrony_tracking(r.stdout) if r.rc == 0 else {},
                                      profile.expect.time.max_offset_ms)
    if r.rc != 0:
        unit = profile.expect.time.service
        show = node.run(f"systemctl show {unit} -p ActiveState,SubState,Result,ConditionResult").stdout
        props = dict(line.split("=", 1) for line in show.splitlines() if "=" in line)
        state = [props.get(k, "?") for k in ("ActiveState", "SubState", "Result", "ConditionResult")]
        journal = node.run(f"journalctl -u {unit} -n 20 --no-pager -o cat 2>/dev/null | grep -iE "
                           "'fail|error|not permitted|condition' | tail -n 1").stdout.strip()
        problems = [f"{unit} is {'/'.join(state[:2]) or 'unknown'} (result {state[2] if len(state) > 2 else '?'}"
                    + (", start condition unmet" if len(state) > 3 and state[3] == "no" else "") + ")"
                    + (f": {journal[:160]}" if journal else "")
                    + f"; chronyc: {(r.stderr or r.stdout).strip()[-80:]}"]
    assert not problems, f"{node_name}: time: " + "; ".join(problems)


def test_interface_pinned(node, node_name, cluster, profile):
    """Horovod, Gloo and NCCL are pinned to the interface that carries this
    node's cluster address."""
    address = cluster.contract.node(node_name).address
    actual = causes.interface_of(node, address)
    r = run_as(node, profile.training_user.name,
               'echo "$REFARCH_CLUSTER_IFACE $GLOO_SOCKET_IFNAME $NCCL_SOCKET_IFNAME"', timeout_s=30)
    pins = dict(zip(("REFARCH_CLUSTER_IFACE", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"),
                    r.stdout.split() + ["", "", ""], strict=False))
    wrong = [f"{k}={v or '(unset)'}" for k, v in pins.items() if v != actual]
    assert actual, f"{node_name}: no interface carries the cluster address {address}"
    assert not wrong, f"{node_name}: cluster interface is {actual}, but {', '.join(wrong)}"


def test_listening_sockets_allowed(node, node_name, profile):
    """Nothing listens beyond loopback except the profile's allow-list."""
    with node.sudo():
        out = node.check_output("ss -Hlntu")
    extra = sorted(checks.listening_sockets(out) - set(profile.expect.listening))
    assert not extra, f"{node_name}: listening beyond the allow-list {profile.expect.listening}: {extra}"


#: Listens on an ephemeral TCP port, prints it, accepts one connection.
LISTENER = ("import socket, sys; s = socket.socket(); s.bind(('', 0)); s.listen(1); "
            "print(s.getsockname()[1], flush=True); sys.stdout.close(); s.settimeout(15); s.accept()")


def test_peer_ports_reachable(node, node_name, cluster, hosts):
    """TCP to an ephemeral port on every peer connects within 5 s (MPI, Gloo
    and NCCL use such ports; a firewall that admits only 22 fails here,
    naming the pair, instead of hanging a job)."""
    failures = []
    for peer in cluster.contract.nodes:
        if peer.name == node_name:
            continue
        probe = f"/tmp/.refarch-port-{node_name}"
        listener = hosts[peer.name].run(
            f"timeout 20 python3 -c %s > {probe} 2>&1 & echo $! > {probe}.pid; sleep 1; cat {probe}", LISTENER)
        try:
            port = listener.stdout.strip()
            if not port.isdigit():
                failures.append(f"{peer.name}: could not open a test listener ({port[:80]})")
                continue
            r = node.run(f"timeout 5 bash -c 'exec 3<>/dev/tcp/{peer.address}/{port}'")
            if r.rc != 0:
                why = "timed out after 5 s" if r.rc == 124 else (r.stderr.strip().splitlines() or ["refused"])[-1]
                failures.append(f"{node_name} -> {peer.name} ({peer.address}) TCP {port}: {why}")
        finally:
            # The probe's listener must not outlive the check (it would fail
            # the listening-sockets check of the next run).
            hosts[peer.name].run(f"pkill -P $(cat {probe}.pid) 2>/dev/null; kill $(cat {probe}.pid) 2>/dev/null;"
                                 f" rm -f {probe} {probe}.pid")
    assert not failures, "; ".join(failures)


def check_build_limit_s(profile) -> int:
    """Seconds `horovodrun --check-build` and each extension's import may
    take on a node before the check says it did not finish: the profile's
    check limit (timeouts_s.check), a guard against a hang, not a measure of
    speed.  Each imports TensorFlow: about 14 s on a 2-core node, past 120 s
    on both nodes of a healthy cluster in ci/test.sh's lanes beside a QEMU
    (TCG) scenario, and minutes in guests under TCG (openstack-aio-guests)."""
    return profile.timeouts_s.check


@pytest.fixture(scope="session")
def horovod_build_outputs(hosts, cluster, run_state, profile) -> dict:
    """{node name: (`horovodrun --check-build` result, {framework: result of
    importing its compiled extension})} for every reachable node, asked of
    all nodes at once: each is several TensorFlow imports (about 14 s on a
    2-core node), one node after another they were the slowest node check.
    An exception on a node is kept as that node's value.

    Once per session: the node checks run node by node across modules, so a
    module-scoped fixture was asked again for every node (N times all N
    nodes: 436 s of an 8-node run's checks, 54 s each time)."""
    from concurrent.futures import ThreadPoolExecutor

    user = profile.training_user.name
    limit_s = check_build_limit_s(profile)

    def gather(name):
        try:
            host = hosts[name]
            build = run_as(host, user, "horovodrun --check-build", timeout_s=limit_s)
            imports = {}
            for framework in profile.expect.horovod_build.frameworks:
                module = checks.HOROVOD_EXTENSIONS.get(framework, f"horovod.{framework.lower()}")
                imports[framework] = (module, run_as(host, user, f"{HOROVOD_PYTHON} -c 'import {module}'",
                                                     timeout_s=limit_s))
            return build, imports
        except Exception as exc:  # noqa: BLE001 -- raised again by that node's test
            return exc

    names = [n for n in hosts if not probe_ssh(cluster, run_state, n)]
    with ThreadPoolExecutor(max_workers=max(len(names), 1)) as pool:
        return dict(zip(names, pool.map(gather, names), strict=True))


def test_horovod_build(node, node_name, profile, horovod_build_outputs):
    """Horovod has the frameworks and controllers the profile expects
    (TensorFlow, Gloo, MPI on the local profile).

    What is trusted, and why: `horovodrun --check-build` is trusted for the
    controllers, not for the frameworks: it lists PyTorch as built for a
    TensorFlow-only build (upstream Horovod does the same; seen as FAULTS
    F11, because `import horovod.torch` only warns when the extension is
    missing).  A framework counts
    only when its compiled extension imports on the node
    (checks.HOROVOD_EXTENSIONS, e.g. horovod.tensorflow.mpi_ops)."""
    outputs = horovod_build_outputs.get(node_name)
    if outputs is None:
        pytest.fail(f"{node_name}: not asked for its Horovod build (it was unreachable when the nodes were asked)")
    if isinstance(outputs, Exception):
        raise outputs
    r, imports = outputs
    late = timed_out(r, check_build_limit_s(profile))
    assert not late, f"{node_name}: horovodrun --check-build {late} (the node too busy, or its Python hangs)"
    assert r.rc == 0, f"{node_name}: horovodrun --check-build failed: {r.stderr.strip()[-300:]}"
    built = checks.parse_check_build(r.stdout)
    want = profile.expect.horovod_build
    missing = checks.missing_build_features(built, want.frameworks, want.controllers)
    problems = [f"Horovod lacks {', '.join(missing)} (built: {built})"] if missing else []
    # check-build can claim a framework whose extension was not built: import each one.
    for framework, (module, r) in imports.items():
        if r.rc != 0:
            out = f"{r.stdout}\n{r.stderr}"
            why = timed_out(r, check_build_limit_s(profile)) or checks.root_cause(out) or \
                (out.strip().splitlines() or [f"exit {r.rc}"])[-1]
            problems.append(f"{module} ({framework}) does not import: {why[-200:]} (--check-build may list "
                            "a framework whose extension was not compiled: the extension decides)")
    assert not problems, f"{node_name}: " + "; ".join(problems)


def test_file_module_as_training_user(node_name, profile, cluster):
    """Ansible can run a file module as the training user (become_user to an
    unprivileged user needs setfacl, package acl, on the node)."""
    if getattr(cluster, "rundir", None) is None:
        pytest.skip("--existing-hosts: no inventory of this run to drive Ansible with")
    user = profile.training_user.name
    dest = f"/tmp/.refarch-become-{node_name}"
    r = ansible.run_module(cluster.inventory_path(), node_name, "ansible.builtin.copy",
                           f"content=ok dest={dest} mode=0600", become_user=user,
                           log=cluster.rundir.logs / "checks-ansible.log")
    ansible.run_module(cluster.inventory_path(), node_name, "ansible.builtin.file", f"path={dest} state=absent",
                       become_user=user, log=cluster.rundir.logs / "checks-ansible.log")
    assert r.rc == 0, (f"{node_name}: an Ansible file module cannot run as {user} (become_user): "
                       f"{ansible.failure_message(r.output)} (log: {cluster.rundir.logs / 'checks-ansible.log'})")
