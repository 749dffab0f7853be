"""Checks of sshd open new SSH connections: a shared ControlMaster
connection opened before a fault would still reach a node whose sshd has
since moved or stopped."""

from types import SimpleNamespace

from refarch.proc import FRESH_CONNECTION
from refarch.pytest.hosts import fresh_host


def _ssh_command(host) -> str:
    cmd, args = host.backend._build_ssh_command("true")
    return " ".join(cmd) % tuple(args)


def test_fresh_host_never_shares_a_connection(tmp_path):
    cluster = SimpleNamespace(rundir=SimpleNamespace(ssh_dir=tmp_path))
    line = _ssh_command(fresh_host(cluster, "node2"))
    assert "ControlMaster=no" in line and "ControlPath=none" in line
    assert "ControlMaster=auto" not in line and "ControlPersist" not in line
    # Options on the command line win over the run's ssh_config (which
    # shares connections for the other checks).
    assert line.index(FRESH_CONNECTION) < line.index(f"-F {tmp_path}/config")


def test_the_shared_host_does_share(tmp_path):
    import testinfra

    line = _ssh_command(testinfra.get_host("ssh://node2", ssh_config=str(tmp_path / "config")))
    assert "ControlMaster=auto" in line
