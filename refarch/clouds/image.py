"""The local cloud's node image: a Debian tree made with debootstrap, turned
into a VM-like container image with ``podman import``.

The image is tagged with a hash of its build inputs (suite, package list,
customize script), so a change of pins rebuilds it and an unchanged one is
reused from podman's storage; teardown never removes it.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from .. import proc
from ..paths import TERRAFORM_DIR, cache_dir, cache_lock, load_versions

IMAGE_REPO = "localhost/refarch-node"
CUSTOMIZE = TERRAFORM_DIR / "local" / "image" / "customize.sh"
#: Bump when the way the image is assembled changes (it is part of the tag).
IMAGE_FORMAT = 2
#: Packages every node image has before the pins' ``node_packages``.
BASE_PACKAGES = [
    "systemd", "systemd-sysv", "dbus", "openssh-server", "python3", "sudo",
    "iproute2", "ca-certificates", "python3-apt",
]


def image_inputs(versions: dict | None = None) -> dict:
    """The build inputs that identify an image (a JSON-able dict)."""
    versions = versions or load_versions()
    return {
        "suite": versions["debian_suite"],
        "packages": sorted(set(BASE_PACKAGES) | set(versions["node_packages"])),
        "customize": CUSTOMIZE.read_text(encoding="utf-8"),
        "format": IMAGE_FORMAT,
    }


def image_tag(versions: dict | None = None) -> str:
    """``localhost/refarch-node:<12 hex chars of the inputs' sha256>``."""
    digest = hashlib.sha256(repr(sorted(image_inputs(versions).items())).encode()).hexdigest()
    return f"{IMAGE_REPO}:{digest[:12]}"


def image_exists(tag: str) -> bool:
    """True when podman's storage holds ``tag``."""
    return subprocess.run(["podman", "image", "exists", tag], check=False).returncode == 0


def ensure_image(log: Path, timeout_s: float = 1200) -> str:
    """Build the node image unless it is cached; return its tag.

    Takes about a minute cold (debootstrap of ~300 packages), nothing warm.

    Raises:
        CommandError: debootstrap, the customize script or podman import failed.
        PhaseTimeout: the build ran past ``timeout_s`` seconds.
    """
    with cache_lock("image"):
        return _ensure_image(log, timeout_s)


def _ensure_image(log: Path, timeout_s: float) -> str:
    inputs = image_inputs()
    tag = image_tag()
    if not image_exists(tag):
        debootstrap_image(tag, inputs["suite"], inputs["packages"], CUSTOMIZE, log, timeout_s)
    return tag


#: Tag of a bare Debian image (debootstrap minbase, nothing added): what a
#: fresh machine has, for the bootstrap test.
FRESH_REPO = "localhost/refarch-fresh"


def ensure_fresh_image(log: Path, timeout_s: float = 900, suite: str | None = None) -> str:
    """A bare Debian root (``debootstrap --variant=minbase``, made the same
    way as the node image, nothing else installed) as a podman image, cached
    by suite; returns its tag.

    Raises:
        CommandError, PhaseTimeout: as :func:`ensure_image`.
    """
    suite = suite or load_versions()["debian_suite"]
    tag = f"{FRESH_REPO}:{suite}-{IMAGE_FORMAT}"
    with cache_lock("image"):
        if not image_exists(tag):
            debootstrap_image(tag, suite, [], None, log, timeout_s)
    return tag


def debootstrap_image(tag: str, suite: str, packages: list[str], customize: Path | None, log: Path,
                      timeout_s: float) -> None:
    """``debootstrap --variant=minbase`` of ``suite`` with ``packages``, then
    ``customize`` run in a chroot, imported into podman as ``tag``.

    Raises:
        CommandError: debootstrap, the customize script or podman import failed.
        PhaseTimeout: debootstrap ran past ``timeout_s`` seconds.
    """
    work = Path(tempfile.mkdtemp(prefix="image-", dir=cache_dir()))
    try:
        tree = work / "rootfs"
        include = ["--include=" + ",".join(packages)] if packages else []
        proc.run(["debootstrap", "--variant=minbase", *include, suite, str(tree)], timeout_s=timeout_s, log=log)
        if customize is not None:
            shutil.copy(customize, tree / "customize.sh")
            proc.run(["chroot", str(tree), "/bin/sh", "/customize.sh"], timeout_s=300, log=log)
            (tree / "customize.sh").unlink()
        tar = subprocess.Popen(["tar", "-C", str(tree), "-c", "."], stdout=subprocess.PIPE)
        try:
            proc.run(
                ["podman", "import", "--change", 'CMD ["/sbin/init"]',
                 "--message", f"refarch {tag}", "-", tag],
                timeout_s=600, log=log, stdin=tar.stdout,
            )
        finally:
            tar.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)
