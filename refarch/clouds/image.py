"""The local cloud's node image: a Debian tree made with debootstrap, turned
into a VM-like container image with ``podman import``.

The image is tagged with a hash of its build inputs (suite, package list,
customize script), so a change of pins rebuilds it and an unchanged one is
reused from podman's storage; teardown never removes it.  The tree is made
as every Debian image of the suite is (refarch.tools.debootstrap).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from ..paths import TERRAFORM_DIR, cache_lock, load_versions
from ..tools.debootstrap import IMAGE_FORMAT, debootstrap_image, image_exists

IMAGE_REPO = "localhost/refarch-node"
CUSTOMIZE = TERRAFORM_DIR / "local" / "image" / "customize.sh"
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
