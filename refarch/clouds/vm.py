"""QEMU virtual machines with a real kernel, for the role scenarios that
containers cannot test: the kernel NFS server and client, a cloud-init
boot, a reboot.

- **Image** (:mod:`refarch.clouds.vmimage`): Debian's cloud kernel and
  packages in a cached qcow2 base; each VM boots a qcow2 overlay of it
  with direct kernel boot, on KVM where nested guests run, TCG otherwise
  (on this kind of machine /dev/kvm exists but nested guests hang).
- **Network**: a bridge per run (``rv<6>``, an address in a reserved /24)
  and a tap per VM (``rv<6>t<i>``); a unit in the image sets the guest's
  address from the kernel command line (``refarch.address=``). No route leaves the bridge.
- **Identity**: every VM gets a NoCloud seed (``cloud-localds``) whose
  user-data is the OpenStack module's cloud-init template rendered by
  Terraform (``descriptors/terraform/cloud-init-render``) with a host key
  made for it, and whose meta-data carries the run's public key as
  OpenStack's metadata service does: the first SSH connection is strict
  against a known_hosts written beforehand.
- **Ownership**: a VM run is a run directory (``runs/<run id>``, owner in
  run.json, kept once up); its qemu processes are named
  ``refarch-vm-<run id>-<node>``; :func:`destroy` kills them (pid files,
  checked against the name), deletes the taps and the bridge and releases
  the subnet; :func:`leftovers` finds any of them by name.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from .. import proc
from ..errors import PreflightError, RefarchError
from ..owner import Owner, delegated
from ..paths import TERRAFORM_DIR, write_private
from ..run import RunDir, new_run_id, orphaned_runs
from ..tools.terraform import Terraform
from . import local as localcloud
from .vmimage import VMImage, accelerator, ensure_image

#: Where VM runs take their /24 from (apart from the local cloud's pool).
SUBNET_POOL = "10.215.0.0/16"
BRIDGE_PREFIX = "rv"
NAME_PREFIX = "refarch-vm-"
TEMPLATE = TERRAFORM_DIR / "openstack" / "templates" / "cloud-init.yaml.tftpl"
#: Host commands the VM platform needs (ci/host-commands.tsv stage vm).
COMMANDS = ("qemu-system-x86_64", "qemu-img", "mkfs.ext4", "cloud-localds", "debootstrap", "chroot", "ip",
            "ssh-keygen", "terraform")


def preflight() -> None:
    """One line naming what the VM platform lacks, before anything is made.

    Raises:
        PreflightError: a host command, /dev/net/tun or root is missing.
    """
    missing = [c for c in COMMANDS if not shutil.which(c)]
    if missing:
        raise PreflightError(f"the VM platform needs {', '.join(missing)} (ci/bootstrap.sh vm installs them)")
    if not Path("/dev/net/tun").exists():
        raise PreflightError("the VM platform needs /dev/net/tun (tap devices for the VMs' network)")
    if os.geteuid() != 0:
        raise PreflightError("the VM platform needs root (bridge, tap devices, debootstrap)")


@dataclass
class VMNode:
    """One VM: ``name`` (hostname), ``address``, ``tap`` and its extra disk
    (``volume_gb`` > 0: ``/dev/vdb``, standing for an OpenStack volume)."""

    name: str
    address: str
    tap: str
    volume_gb: int = 0


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return proc.run(["ip", *args], timeout_s=30, check=check)


def bridge_name(run_id: str) -> str:
    return BRIDGE_PREFIX + run_id[-6:]


def up(nodes: int, volumes: dict[str, int] | None = None, seed_without_host_keys: bool = False,
       log_name: str = "vm.log", boot_timeout_s: float = 420) -> RunDir:
    """Boot ``nodes`` VMs (``node1``..) on a bridge of their own, each with
    its NoCloud seed; wait until every one answers SSH with strict host key
    checking; write ``inventory.yml`` (the suite's layout: ``cluster`` and
    ``storage_server`` groups, ``cluster_contract`` with NFS storage on
    node1) and ``ssh/config``; return the run directory (kept).

    ``seed_without_host_keys`` drops the host keys from the rendered
    user-data (the proof that the strict check notices).

    Raises:
        PreflightError: see :func:`preflight`.
        RefarchError: a VM did not answer SSH within ``boot_timeout_s``
            (the console log is named); what was made is destroyed.
    """
    preflight()
    volumes = volumes or {}
    rundir = RunDir.create(new_run_id("hvd-vm"))
    log = rundir.logs / log_name
    try:
        _up(rundir, log, nodes, volumes, seed_without_host_keys, boot_timeout_s)
    except BaseException:
        destroy(rundir.run_id)
        raise
    rundir.update_meta(kept=not delegated(), cloud="vm")
    return rundir


def _up(rundir: RunDir, log: Path, count: int, volumes: dict[str, int], no_host_keys: bool,
        boot_timeout_s: float) -> None:
    image = ensure_image(log)
    accel = accelerator(image, log)
    owner = Owner.current(rundir.path)
    subnet = ipaddress.ip_network(localcloud.reserve_subnet(SUBNET_POOL, 24, rundir.run_id, owner))
    hosts = list(subnet.hosts())
    bridge = bridge_name(rundir.run_id)
    nodes = [VMNode(f"node{i}", str(hosts[9 + i]), f"{bridge}t{i}", volumes.get(f"node{i}", 0))
             for i in range(1, count + 1)]
    rundir.update_meta(cloud="vm", subnet=str(subnet), bridge=bridge, nodes=[n.__dict__ for n in nodes],
                       profile="local", overrides={"shared_storage.type": "nfs"})
    _ip("link", "add", bridge, "type", "bridge")
    _ip("addr", "add", f"{hosts[0]}/{subnet.prefixlen}", "dev", bridge)
    _ip("link", "set", bridge, "up")
    ssh = rundir.ssh_dir
    ssh.mkdir(mode=0o700)
    proc.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", rundir.run_id, "-f", str(ssh / "id_ed25519")],
             timeout_s=30)
    seeds = _seeds(rundir, nodes, no_host_keys, log)
    vmdir = rundir.path / "vm"
    vmdir.mkdir()
    for node in nodes:
        _boot(rundir, image, accel, node, seeds[node.name], subnet, vmdir)
    _write_access(rundir, nodes, subnet)
    deadline = time.monotonic() + boot_timeout_s
    for node in nodes:
        _wait_ssh(rundir, node, deadline)


def _seeds(rundir: RunDir, nodes: list[VMNode], no_host_keys: bool, log: Path) -> dict[str, Path]:
    """NoCloud seed per node: user-data rendered by Terraform from the
    OpenStack template with a fresh host key, meta-data with the run key."""
    keys = rundir.path / "host-keys"
    keys.mkdir(mode=0o700)
    inputs = []
    for node in nodes:
        key = keys / node.name
        proc.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", node.name, "-f", str(key)], timeout_s=30)
        public = (keys / f"{node.name}.pub").read_text().strip()
        inputs.append({"hostname": node.name, "address": node.address, "host_key": key.read_text(),
                       "host_public_key": public})
    tf = Terraform(rundir.path / "cloud-init-render", "cloud-init-render", log,
                   source=TERRAFORM_DIR / "cloud-init-render")
    tf.write_vars({"template_file": str(TEMPLATE), "nodes": inputs})
    tf.apply(300)
    outputs = tf.outputs()
    user_data = outputs["user_data"]
    write_private(rundir.ssh_dir / "known_hosts", outputs["known_hosts"])
    run_key = (rundir.ssh_dir / "id_ed25519.pub").read_text().strip()
    seeds = {}
    for node in nodes:
        text = user_data[node.name]
        if no_host_keys:
            doc = yaml.safe_load(text)
            doc.pop("ssh_keys", None)
            doc.pop("ssh_genkeytypes", None)
            text = "#cloud-config\n" + yaml.safe_dump(doc)
        folder = rundir.path / "seed" / node.name
        folder.mkdir(parents=True)
        write_private(folder / "user-data", text)
        (folder / "meta-data").write_text(yaml.safe_dump({
            "instance-id": f"{rundir.run_id}-{node.name}", "local-hostname": node.name,
            "public-keys": [run_key]}), encoding="utf-8")
        seed = folder / "seed.img"
        proc.run(["cloud-localds", str(seed), str(folder / "user-data"), str(folder / "meta-data")], timeout_s=60,
                 log=log)
        seeds[node.name] = seed
    return seeds


def _boot(rundir: RunDir, image: VMImage, accel: list[str], node: VMNode, seed: Path,
          subnet: ipaddress.IPv4Network, vmdir: Path) -> None:
    _ip("tuntap", "add", "dev", node.tap, "mode", "tap")
    _ip("link", "set", node.tap, "master", bridge_name(rundir.run_id))
    _ip("link", "set", node.tap, "up")
    disk = vmdir / f"{node.name}.qcow2"
    proc.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(image.base), "-F", "qcow2", str(disk)], timeout_s=60)
    drives = ["-drive", f"file={disk},if=virtio,format=qcow2"]
    if node.volume_gb:
        volume = vmdir / f"{node.name}-volume.img"
        proc.run(["qemu-img", "create", "-q", "-f", "raw", str(volume), f"{node.volume_gb}G"], timeout_s=60)
        drives += ["-drive", f"file={volume},if=virtio,format=raw"]
    drives += ["-drive", f"file={seed},if=virtio,format=raw,readonly=on"]
    gateway = next(subnet.hosts())
    mac = "52:54:00:" + ":".join(f"{b:02x}" for b in ipaddress.ip_address(node.address).packed[1:])
    append = (f"root=/dev/vda rw console=ttyS0 net.ifnames=0 panic=30 "
              f"refarch.address={node.address}/{subnet.prefixlen} refarch.gateway={gateway}")
    proc.run(["qemu-system-x86_64", "-name", f"{NAME_PREFIX}{rundir.run_id}-{node.name}", *accel, "-smp", "1",
              "-m", "1024", "-display", "none", "-monitor", "none", "-serial", f"file:{rundir.logs / node.name}-console.log",
              "-kernel", str(image.kernel), "-initrd", str(image.initrd), "-append", append, *drives,
              "-netdev", f"tap,id=net0,ifname={node.tap},script=no,downscript=no",
              "-device", f"virtio-net-pci,netdev=net0,mac={mac}",
              "-daemonize", "-pidfile", str(vmdir / f"{node.name}.pid")], timeout_s=60)


def _write_access(rundir: RunDir, nodes: list[VMNode], subnet: ipaddress.IPv4Network) -> None:
    ssh = rundir.ssh_dir
    config = [f"Host {n.name}\n  HostName {n.address}\n  User debian\n  IdentityFile {ssh / 'id_ed25519'}\n"
              f"  IdentitiesOnly yes\n  UserKnownHostsFile {ssh / 'known_hosts'}\n  StrictHostKeyChecking yes\n"
              "  BatchMode yes\n  ConnectTimeout 10\n" for n in nodes]
    (ssh / "config").write_text("\n".join(config), encoding="utf-8")
    storage = {"type": "nfs", "server": nodes[0].name, "server_address": nodes[0].address, "export": "/srv/shared",
               "mount_point": "/shared", **({"device": "/dev/vdb"} if nodes[0].volume_gb else {})}
    inventory = {"all": {
        "vars": {
            "ansible_user": "debian",
            "ansible_ssh_private_key_file": str(ssh / "id_ed25519"),
            "ansible_ssh_common_args": f"-o StrictHostKeyChecking=yes -o UserKnownHostsFile={ssh / 'known_hosts'}",
            "ansible_python_interpreter": "/usr/bin/python3",
            "cluster_contract": {"run_id": rundir.run_id, "cloud": "vm", "cluster_cidr": str(subnet),
                                 "shared_storage": storage},
            "training_user": {"name": "hvd", "uid": 2001},
            "shared_storage_nfs_version": "4.2",
        },
        "children": {
            "cluster": {"hosts": {n.name: {"ansible_host": n.address} for n in nodes}},
            "storage_server": {"hosts": {nodes[0].name: {}}},
        },
    }}
    (rundir.path / "inventory.yml").write_text(yaml.safe_dump(inventory, sort_keys=False), encoding="utf-8")


def ssh(rundir: RunDir, node: str, command: str, timeout_s: float = 60, check: bool = False) \
        -> subprocess.CompletedProcess:
    """``command`` on ``node`` over SSH with the run's config (strict host
    key checking against the known_hosts written before boot)."""
    return proc.run(["ssh", "-F", str(rundir.ssh_dir / "config"), node, command], timeout_s=timeout_s, check=check)


def _wait_ssh(rundir: RunDir, node: VMNode, deadline: float) -> None:
    last = ""
    while time.monotonic() < deadline:
        r = ssh(rundir, node.name, "cloud-init status --wait >/dev/null 2>&1; hostname", timeout_s=120)
        if r.returncode == 0 and r.stdout.strip() == node.name:
            return
        last = (r.stderr or r.stdout).strip().splitlines()[-1:] or [f"exit {r.returncode}"]
        last = last[0]
        if "Host key verification failed" in last or "REMOTE HOST IDENTIFICATION HAS CHANGED" in (r.stderr or ""):
            raise RefarchError(f"{node.name} ({node.address}): strict SSH failed: host key verification failed "
                               "(the host key the VM offers is not the one its seed injected)")
        time.sleep(5)
    raise RefarchError(f"{node.name} ({node.address}) did not answer SSH: {last} (console: "
                       f"{rundir.logs / node.name}-console.log)")


def reboot(rundir: RunDir, node: str, timeout_s: float = 420) -> None:
    """Reboot ``node`` and wait until it answers SSH again.

    Raises:
        RefarchError: it did not come back within ``timeout_s``.
    """
    ssh(rundir, node, "sudo systemctl reboot", timeout_s=30)
    time.sleep(10)
    meta = {n["name"]: n for n in rundir.read_meta()["nodes"]}
    _wait_ssh(rundir, VMNode(**meta[node]), time.monotonic() + timeout_s)


def _qemu_pids(run_id: str) -> list[int]:
    """Pids of qemu processes named for ``run_id`` (from /proc, by name)."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"-name" in args:
            name = args[args.index(b"-name") + 1].decode(errors="replace") if args.index(b"-name") + 1 < len(args) else ""
            if name.startswith(f"{NAME_PREFIX}{run_id}-"):
                pids.append(int(cmdline.parent.name))
    return pids


def destroy(run_id: str) -> dict[str, list[str]]:
    """Kill the run's VMs, delete its taps and bridge, release its subnet;
    return what is left (empty when nothing is)."""
    for pid in _qemu_pids(run_id):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 20
    while _qemu_pids(run_id) and time.monotonic() < deadline:
        time.sleep(0.5)
    for pid in _qemu_pids(run_id):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    bridge = bridge_name(run_id)
    for link in _links(bridge):
        _ip("link", "delete", link, check=False)
    localcloud.release_subnet(run_id)
    left = leftovers(run_id)
    try:
        RunDir.open(run_id).update_meta(kept=False, destroyed=True, teardown={"leaks": left})
    except RefarchError:
        pass
    return left


def _links(bridge: str) -> list[str]:
    out = json.loads(_ip("-j", "link", "show", check=False).stdout or "[]")
    return sorted((link["ifname"] for link in out if link["ifname"].startswith(bridge)), reverse=True)


def leftovers(run_id: str) -> dict[str, list[str]]:
    """The run's qemu processes and links that still exist."""
    left = {"qemu": [str(p) for p in _qemu_pids(run_id)], "links": _links(bridge_name(run_id))}
    return {k: v for k, v in left.items() if v}


def stale_runs() -> list[str]:
    """Run ids of VM runs whose bridge or qemu processes exist, that are not
    kept and whose owner process is gone (a killed scenario)."""
    return [path.name for path, _meta in orphaned_runs("hvd-vm-*") if leftovers(path.name)]
