"""A Debian root made with ``debootstrap --variant=minbase`` and imported
into podman: how every Debian image of the suite is made.

The local cloud's node image (:mod:`refarch.clouds.image`) adds packages
and a customize script; the bare Debian root (:func:`ensure_fresh_image`,
nothing added: what a fresh machine has) is the base of the toolset image
(:mod:`refarch.tools.toolset`) and of the bootstrap test.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from .. import proc
from ..paths import cache_dir, cache_lock, load_versions

#: Bump when the way an image is assembled changes (it is part of the tags
#: of the node image and of the bare Debian root).
IMAGE_FORMAT = 2


def image_exists(tag: str) -> bool:
    """True when podman's storage holds ``tag``."""
    return subprocess.run(["podman", "image", "exists", tag], check=False).returncode == 0


#: Tag of a bare Debian image (debootstrap minbase, nothing added): what a
#: fresh machine has, for the bootstrap test.
FRESH_REPO = "localhost/refarch-fresh"


def ensure_fresh_image(log: Path, timeout_s: float = 900, suite: str | None = None) -> str:
    """A bare Debian root (``debootstrap --variant=minbase``, made the same
    way as the node image, nothing else installed) as a podman image, cached
    by suite; returns its tag.

    Raises:
        CommandError, PhaseTimeout: as :func:`debootstrap_image`.
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
