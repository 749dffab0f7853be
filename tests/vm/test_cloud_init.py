"""Verify of the VM scenario (nfs), cloud-init part: QEMU VMs booted from
NoCloud seeds whose user-data is the OpenStack module's template rendered
by Terraform, then converged with ssh_hardening and shared_storage.  The
injected user and host key are there, cloud-init finished without errors,
its sshd setting is its own (not only the hardening drop-in's), and the
first SSH connection, strict against the Terraform-made known_hosts,
succeeds.  test_a_seed_without_host_keys_fails_the_strict_check boots a
third VM whose seed lacks the host keys: its first strict SSH connection
must fail, naming host key verification.  Runs before tests/vm/test_nfs.py
(which restarts the server and reboots the client)."""

import subprocess

import pytest

from refarch.clouds import vm
from refarch.errors import RefarchError
from refarch.run import RunDir


def test_the_first_strict_ssh_connection_succeeds(vm_run, tmp_path):
    """A brand-new SSH client state (no ControlMaster, only the known_hosts
    Terraform wrote) reaches the VM as the injected user."""
    r = subprocess.run(["ssh", "-F", str(vm_run.ssh_dir / "config"), "-o", "ControlMaster=no", "-o",
                        "ControlPath=none", "node1", "id -un; hostname"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.split() == ["debian", "node1"], (
        f"node1: strict SSH with the Terraform-made known_hosts failed: {r.stderr.strip()[-300:]}")


def test_the_vm_offers_the_injected_host_key(vm_hosts, vm_run):
    injected = (vm_run.path / "host-keys" / "node1.pub").read_text().split()[:2]
    with vm_hosts["node1"].sudo():
        offered = vm_hosts["node1"].file("/etc/ssh/ssh_host_ed25519_key.pub").content_string.split()[:2]
        others = vm_hosts["node1"].run("ls /etc/ssh/ssh_host_*_key").stdout.split()
    assert offered == injected, f"node1: sshd's ed25519 host key is not the one the seed injected ({offered[1][:20]}...)"
    assert others == ["/etc/ssh/ssh_host_ed25519_key"], f"node1: other host keys were generated: {others}"


def test_cloud_init_finished_without_errors(vm_hosts):
    r = vm_hosts["node1"].run("cloud-init status --long")
    assert r.rc == 0 and "status: done" in r.stdout, f"node1: cloud-init: {r.stdout.strip()[-400:]}"
    with vm_hosts["node1"].sudo():
        schema = vm_hosts["node1"].run("cloud-init schema --system")
    assert schema.rc == 0, f"node1: the rendered user-data fails cloud-init's schema: {schema.stdout} {schema.stderr}"


def test_the_hostname_and_password_policy_come_from_the_seed(vm_hosts):
    """ssh_pwauth: false is applied by cloud-init itself (its edit of
    sshd_config or its own drop-in), besides ssh_hardening's drop-in, which
    converge applied after the boot; and sshd's effective setting agrees."""
    node = vm_hosts["node1"]
    assert node.check_output("hostname") == "node1"
    with node.sudo():
        effective = node.check_output("/usr/sbin/sshd -T")
        seeded = node.run("grep -lisE '^[[:space:]]*PasswordAuthentication[[:space:]]+no' /etc/ssh/sshd_config "
                          "/etc/ssh/sshd_config.d/*cloud-init*")
    assert seeded.stdout.strip(), ("node1: cloud-init wrote no 'PasswordAuthentication no' (ssh_pwauth: false of "
                                   "the seed not applied; only the hardening drop-in would say so)")
    assert "passwordauthentication no" in effective, "node1: sshd accepts passwords (ssh_pwauth: false not applied)"


def test_a_seed_without_host_keys_fails_the_strict_check():
    with pytest.raises(RefarchError, match=r"node1 \(\S+\): strict SSH failed: host key verification failed"):
        rundir = vm.up(1, seed_without_host_keys=True, log_name="vm-no-host-keys.log", boot_timeout_s=420)
        vm.destroy(rundir.run_id)  # not reached when the check works
    # vm.up tears down what it made when the boot fails: nothing of it is left.
    from refarch.paths import runs_dir

    newest = max(runs_dir().glob("hvd-vm-*/run.json"), key=lambda p: p.stat().st_mtime).parent.name
    assert RunDir.open(newest).read_meta().get("destroyed") and not vm.leftovers(newest)
