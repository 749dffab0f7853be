"""The VM image the QEMU virtual machines boot (:mod:`refarch.clouds.vm`):
Debian's cloud kernel and packages only (debootstrap minbase with
:data:`VM_PACKAGES`), an ext4 root made with ``mkfs.ext4 -d``, as a qcow2
base, cached under ``<cache>/vm-image/<key>`` by a hash of its inputs like
the node image; and the accelerator its VMs run on (KVM when a test boot
shows the guest kernel printing, TCG otherwise).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import proc
from ..paths import cache_dir, cache_lock, load_versions

#: Debian packages of the VM image (the scenarios' roles find them installed:
#: the VMs have no route to a mirror); iputils-ping: the suite's network
#: path check, which the storage checks ask first (the common role installs
#: it on a cluster).
VM_PACKAGES = ["linux-image-cloud-amd64", "systemd-sysv", "udev", "dbus", "openssh-server",
               "nfs-kernel-server", "nfs-common", "e2fsprogs", "iproute2", "chrony", "python3", "python3-apt",
               "sudo", "acl", "initramfs-tools", "kmod", "ca-certificates", "iputils-ping"]
#: Installed with apt in the tree after debootstrap (debootstrap's own
#: configuration order fails on cloud-init's python3-cryptography).
LATER_PACKAGES = ["cloud-init"]
#: The start of every VM image's customize script (run in the root tree):
#: the later packages installed with no service started, no apt lists, no
#: host keys (each VM makes its own), the root file system in fstab.
PREPARE_ROOT = """set -eu
mount -t proc proc /proc
trap 'umount /proc' EXIT
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends @LATER@
rm -f /usr/sbin/policy-rc.d
apt-get clean
rm -rf /var/lib/apt/lists/* /etc/resolv.conf
rm -f /etc/ssh/ssh_host_*
printf '/dev/vda / ext4 defaults 0 1\\n' > /etc/fstab
"""
#: Run in the root tree (chroot) before the file system is made.
CUSTOMIZE = PREPARE_ROOT + """cat > /etc/cloud/cloud.cfg.d/99-refarch.cfg <<'EOF'
# The scenarios' NoCloud seed; refarch-address sets the address.
datasource_list: [NoCloud, None]
network: {config: disabled}
# Debian's cloud images carry locales; this image does not.
locale: false
EOF
# The address from the kernel command line (refarch.address=A/P refarch.gateway=G),
# standing in for a cloud's DHCP; before the network is up.
cat > /usr/local/sbin/refarch-address <<'EOF'
#!/bin/sh
set -eu
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        refarch.address=*) address=${arg#*=} ;;
        refarch.gateway=*) gateway=${arg#*=} ;;
    esac
done
[ -n "${address:-}" ] || exit 0
ip link set eth0 up
ip address replace "$address" dev eth0
[ -z "${gateway:-}" ] || ip route replace default via "$gateway" dev eth0
EOF
chmod 755 /usr/local/sbin/refarch-address
cat > /etc/systemd/system/refarch-address.service <<'EOF'
[Unit]
Description=Address of eth0 from the kernel command line
DefaultDependencies=no
BindsTo=sys-subsystem-net-devices-eth0.device
After=sys-subsystem-net-devices-eth0.device
Before=network-pre.target
Wants=network-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/refarch-address

[Install]
WantedBy=multi-user.target
EOF
systemctl enable refarch-address.service
"""
#: Bump when the way the image is assembled changes.
IMAGE_FORMAT = 3


@dataclass(frozen=True)
class VMImage:
    """A cached VM image: ``base`` (qcow2), ``kernel`` and ``initrd``."""

    base: Path
    kernel: Path
    initrd: Path


@dataclass(frozen=True)
class Recipe:
    """How a Debian VM image is made: ``debootstrap --variant=minbase`` with
    ``packages``, then ``later`` installed with apt in the tree, then the
    ``customize`` shell script (``@LATER@`` replaced by ``later``) run in
    the tree, then ``finish(tree, log)`` from the host (e.g. a virtualenv
    installed natively), then an ext4 root of ``size`` as a qcow2 base.

    Attributes:
        name: the cache folder, ``<cache>/<name>/<key>``.
        extra_inputs: what else the image depends on (JSON-able), hashed
            into its key with the rest.
    """

    name: str
    packages: tuple[str, ...]
    later: tuple[str, ...]
    customize: str
    size: str = "3G"
    extra_inputs: dict | None = None
    finish: Callable[[Path, Path], None] | None = None

    def key(self, versions: dict | None = None) -> str:
        """12 hex chars of the sha256 of the image's inputs."""
        versions = versions or load_versions()
        inputs = {"suite": versions["debian_suite"], "packages": sorted(self.packages), "later": list(self.later),
                  "customize": self.customize, "format": IMAGE_FORMAT}
        if self.name != "vm-image":
            inputs.update(size=self.size, extra=self.extra_inputs)
        return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:12]

    def home(self) -> Path:
        """The image's cache folder."""
        return cache_dir() / self.name / self.key()


#: The role scenarios' VMs.
SCENARIO_RECIPE = Recipe("vm-image", tuple(VM_PACKAGES), tuple(LATER_PACKAGES), CUSTOMIZE)


def image_key(versions: dict | None = None) -> str:
    """12 hex chars of the sha256 of the scenarios' image's inputs."""
    return SCENARIO_RECIPE.key(versions)


def ensure_image(log: Path, timeout_s: float = 1200, recipe: Recipe = SCENARIO_RECIPE) -> VMImage:
    """Build the VM image of ``recipe`` unless cached (the scenarios' image:
    about 2 min cold); return it.

    Raises:
        CommandError: debootstrap, the chroot script or mkfs failed.
        PhaseTimeout: past ``timeout_s`` seconds.
    """
    home = recipe.home()
    with cache_lock(recipe.name):
        if not (home / "done").exists():
            _build_image(recipe, home, log, timeout_s)
    return VMImage(home / "base.qcow2", home / "vmlinuz", home / "initrd.img")


def _build_image(recipe: Recipe, home: Path, log: Path, timeout_s: float) -> None:
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    work = Path(tempfile.mkdtemp(prefix=f"{recipe.name}-", dir=cache_dir()))
    try:
        tree = work / "root"
        proc.run(["debootstrap", "--variant=minbase", "--include=" + ",".join(recipe.packages),
                  load_versions()["debian_suite"], str(tree)], timeout_s=timeout_s, log=log)
        (tree / "customize.sh").write_text(recipe.customize.replace("@LATER@", " ".join(recipe.later)),
                                           encoding="utf-8")
        shutil.copy("/etc/resolv.conf", tree / "etc" / "resolv.conf")
        proc.run(["chroot", str(tree), "/bin/sh", "/customize.sh"], timeout_s=600, log=log)
        (tree / "customize.sh").unlink()
        if recipe.finish is not None:
            recipe.finish(tree, log)
        (tree / "etc" / "resolv.conf").unlink(missing_ok=True)
        shutil.copy(next(tree.glob("boot/vmlinuz-*")), home / "vmlinuz")
        shutil.copy(next(tree.glob("boot/initrd.img-*")), home / "initrd.img")
        raw = work / "base.img"
        proc.run(["mkfs.ext4", "-q", "-F", "-d", str(tree), str(raw), recipe.size], timeout_s=300, log=log)
        proc.run(["qemu-img", "convert", "-O", "qcow2", str(raw), str(home / "base.qcow2")], timeout_s=300, log=log)
        (home / "done").write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), encoding="utf-8")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def accelerator(image: VMImage, log: Path) -> list[str]:
    """QEMU's accelerator arguments: KVM when a 20 s test boot with it shows
    the guest kernel's banner on the serial console, else TCG. The answer
    is kept per boot of this machine (``<cache>/vm-accel.json``)."""
    memo = cache_dir() / "vm-accel.json"
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    try:
        saved = json.loads(memo.read_text())
        if saved.get("boot_id") == boot:
            return saved["args"]
    except (OSError, ValueError):
        pass
    tcg = ["-accel", "tcg,thread=multi", "-cpu", "max"]
    args = tcg
    if Path("/dev/kvm").exists():
        with tempfile.TemporaryDirectory() as tmp:
            console = Path(tmp) / "console"
            p = subprocess.Popen(["qemu-system-x86_64", "-accel", "kvm", "-cpu", "host,-arch-capabilities", "-m", "256",
                                  "-display", "none", "-serial", f"file:{console}", "-kernel", str(image.kernel),
                                  "-append", "console=ttyS0 panic=-1", "-no-reboot"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and p.poll() is None:
                if console.exists() and "Linux version" in console.read_text(errors="replace"):
                    args = ["-accel", "kvm", "-cpu", "host,-arch-capabilities"]
                    break
                time.sleep(1)
            p.kill()
            p.wait()
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(f"accelerator: {' '.join(args)}\n")
    memo.write_text(json.dumps({"boot_id": boot, "args": args}))
    return args
