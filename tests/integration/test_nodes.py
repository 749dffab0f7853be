"""Node checks: pytest-testinfra over SSH, one test per node.

Every expectation comes from the profile; every failure names the node.
"""

import pytest

from refarch import checks
from refarch.pytest_plugin import run_as

pytestmark = [pytest.mark.integration, pytest.mark.check_phase]


def test_sshd_effective_settings(node, node_name, profile):
    """The effective sshd configuration (`sshd -T`) has the hardening the
    profile expects (no password or keyboard-interactive login, ...)."""
    with node.sudo():
        out = node.check_output("/usr/sbin/sshd -T")
    problems = checks.sshd_violations(checks.parse_sshd_t(out), profile.expect.sshd)
    assert not problems, f"{node_name}: sshd -T: " + "; ".join(problems)


def test_training_user(node, node_name, profile):
    """The training user exists with the profile's uid (same on every node)."""
    want = profile.training_user
    user = node.user(want.name)
    assert user.exists, f"{node_name}: training user {want.name} does not exist"
    assert user.uid == want.uid, f"{node_name}: {want.name} has uid {user.uid}, expected {want.uid}"


def test_ssh_to_every_peer(node, node_name, profile, cluster):
    """As the training user, SSH to every other node by name works with
    BatchMode (no prompt) and strict host key checking (seeded host keys)."""
    failures = []
    for peer in cluster.contract.node_names:
        if peer == node_name:
            continue
        r = run_as(node, profile.training_user.name,
                   f"ssh -o BatchMode=yes -o StrictHostKeyChecking=yes -o ConnectTimeout=10 {peer} hostname",
                   timeout_s=30)
        if r.rc != 0 or r.stdout.strip() != peer:
            detail = (r.stderr.strip() or r.stdout.strip() or f"exit {r.rc}").splitlines()[-1]
            failures.append(f"{node_name} -> {peer}: {detail}")
    assert not failures, "SSH between nodes failed: " + "; ".join(failures)


def test_shared_storage_mounted(node, node_name, profile):
    """The shared storage is mounted read-write with the profile's type."""
    want = profile.shared_storage
    mp = node.mount_point(want.mount_point)
    assert mp.exists, f"{node_name}: nothing mounted at {want.mount_point}"
    fstype = "fuse.sshfs" if want.type == "sshfs" else want.type
    assert mp.filesystem.startswith(fstype), f"{node_name}: {want.mount_point} is {mp.filesystem}, expected {fstype}"
    assert "rw" in mp.options, f"{node_name}: {want.mount_point} is not mounted rw ({','.join(mp.options)})"


def test_shared_storage_write_read_everywhere(node, node_name, profile, hosts):
    """A file the training user writes on this node is read back, byte for
    byte, on every other node."""
    user = profile.training_user.name
    token = f"refarch-{node_name}-{id(node)}"
    path = f"{profile.shared_storage.mount_point}/.refarch-check-{node_name}"
    w = run_as(node, user, f"printf %s {token} > {path} && sync", timeout_s=30)
    assert w.rc == 0, f"{node_name}: training user {user} cannot write {path}: {w.stderr.strip()}"
    failures = []
    for peer, host in hosts.items():
        if peer == node_name:
            continue
        r = run_as(host, user, f"cat {path}", timeout_s=30)
        if r.rc != 0 or r.stdout != token:
            failures.append(f"{peer} reads {r.stdout[:40]!r} (exit {r.rc})")
    run_as(node, user, f"rm -f {path}", timeout_s=30)
    assert not failures, f"file written on {node_name} at {path}: " + "; ".join(failures)


def test_horovod_build(node, node_name, profile):
    """`horovodrun --check-build` lists the frameworks and controllers the
    profile expects (TensorFlow, Gloo, MPI on the local profile)."""
    r = run_as(node, profile.training_user.name, "horovodrun --check-build", timeout_s=120)
    assert r.rc == 0, f"{node_name}: horovodrun --check-build failed: {r.stderr.strip()[-300:]}"
    built = checks.parse_check_build(r.stdout)
    want = profile.expect.horovod_build
    missing = checks.missing_build_features(built, want.frameworks, want.controllers)
    assert not missing, f"{node_name}: Horovod lacks {', '.join(missing)} (built: {built})"
