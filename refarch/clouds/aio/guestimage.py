"""The guest image the all-in-one's Nova boots in guests mode: Debian 12
with cloud-init, made like the role scenarios' VM image
(:mod:`refarch.clouds.vmimage`) and uploaded to Glance as a three-part
image (kernel, ramdisk, qcow2 root: Nova boots the kernel directly, no boot
loader).

The guests have no route to a Debian mirror or PyPI, so the image carries
what the roles install: the pins' ``node_packages``, the NFS server and
client, and the training virtualenv ``/opt/horovod`` installed natively at
build time from the suite's wheelhouse (QEMU's TCG runs a guest's pip
hundreds of times slower).  The same wheelhouse lies on the share's export
with its files' times, so the horovod role's rsync finds it in place.

cloud-init reads its user data and keys from a config drive (``ConfigDrive``
datasource; ``force_config_drive`` in the all-in-one's nova.conf): no
metadata agent and proxy to run on 2 cores, and nothing for a guest to wait
on over the network before its keys are in place.  The address comes from
Neutron's DHCP agent: Nova writes ``ipv4_dhcp`` into the drive's
``network_data.json`` whenever the subnet has DHCP, as the module's has.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ... import proc
from ...paths import load_versions
from ..vmimage import LATER_PACKAGES, PREPARE_ROOT, VM_PACKAGES, Recipe, VMImage, ensure_image

#: Packages besides the scenarios' VM image: ifupdown renders cloud-init's
#: network configuration (Debian's cloud images use it too) and
#: isc-dhcp-client takes the address from Neutron's DHCP agent.
GUEST_PACKAGES = ["ifupdown", "isc-dhcp-client"]
#: The training virtualenv (descriptors/ansible/roles/horovod/defaults/main.yml).
VENV = "/opt/horovod"
#: The share's export on node1 when there is no volume (the profile's
#: ``shared_storage.export``).
SHARE_EXPORT = "/srv/shared"
#: The training user's uid and gid (the profile's ``training_user.uid``).
TRAINING_UID = 2001
#: Kernel command line of the guests (Glance's ``os_command_line``).
COMMAND_LINE = "root=/dev/vda rw console=ttyS0 net.ifnames=0"

CUSTOMIZE = PREPARE_ROOT + """cat > /etc/cloud/cloud.cfg.d/99-refarch.cfg <<'EOF'
# OpenStack's config drive only: the all-in-one forces one (no metadata agent).
datasource_list: [ConfigDrive, None]
# Debian's cloud images carry locales; this image does not.
locale: false
EOF
"""


def recipe(wheelhouse: Path) -> Recipe:
    """The guest image's recipe for ``wheelhouse`` (the suite's cached
    wheelhouse folder, whose name is its key)."""
    versions = load_versions()
    packages = tuple(sorted(set(VM_PACKAGES) | set(versions["node_packages"]) | set(GUEST_PACKAGES)))
    requirements = [f"{versions['tensorflow_package']}=={versions['tensorflow_version']}",
                    f"horovod=={versions['horovod_version']}", *versions.get("python_extra_packages", [])]

    def finish(tree: Path, log: Path) -> None:
        staged = tree / "tmp" / "wheelhouse"
        shutil.copytree(wheelhouse, staged)
        proc.run(["chroot", str(tree), "/usr/bin/python3", "-m", "venv", VENV], timeout_s=120, log=log)
        proc.run(["chroot", str(tree), f"{VENV}/bin/pip", "install", "-q", "--no-index", "--find-links",
                  "/tmp/wheelhouse", "--constraint", "/tmp/wheelhouse/constraints.txt", *requirements],
                 timeout_s=900, log=log)
        shutil.rmtree(staged)
        share = tree / SHARE_EXPORT.lstrip("/") / f"wheelhouse-{wheelhouse.name}"
        shutil.copytree(wheelhouse, share)
        for path in [share.parent, share, *share.rglob("*")]:
            os.chown(path, TRAINING_UID, TRAINING_UID)

    return Recipe("guest-image", packages, tuple(LATER_PACKAGES), CUSTOMIZE, size="6G",
                  extra_inputs={"wheelhouse": wheelhouse.name, "requirements": requirements,
                                "venv": VENV, "share": SHARE_EXPORT, "uid": TRAINING_UID},
                  finish=finish)


def ensure_guest_image(wheelhouse: Path, log: Path, timeout_s: float = 1800) -> VMImage:
    """Build the guest image unless cached (debootstrap, the virtualenv, a
    6 GB ext4 root); return its files.

    Raises:
        CommandError: a build step failed (its output is in ``log``).
        PhaseTimeout: past ``timeout_s`` seconds.
    """
    return ensure_image(log, timeout_s, recipe(wheelhouse))
