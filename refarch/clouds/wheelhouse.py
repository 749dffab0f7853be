"""The wheelhouse: TensorFlow and a Horovod wheel built against it.

Built once in a throwaway container from the node image (so the wheels fit
the nodes) and cached under ``<cache>/wheelhouse/<key>``, where the key is a
hash of the pins and the build script (see :func:`wheelhouse_key`).  The ``horovod``
role copies it to the shared storage and every node installs from there.
"""

from __future__ import annotations

import glob
import hashlib
import json
import shutil
import tempfile
from pathlib import Path

from .. import proc
from ..paths import DESCRIPTORS, cache_dir, cache_lock, load_versions

BUILD_SCRIPT = DESCRIPTORS / "wheelhouse" / "build.sh"
#: Host folder of extra CA certificates (``*.crt``) given to the build.
HOST_CA_GLOB = "/usr/local/share/ca-certificates/*.crt"


def wheelhouse_key(versions: dict | None = None) -> str:
    """16 hex chars identifying a wheelhouse: the pins it depends on (OS
    release, Python, TensorFlow, Horovod and its build flags) and the build
    script.  Node-image changes that leave those alone (another base package)
    keep the wheelhouse."""
    v = versions or load_versions()
    inputs = {
        "tf": [v["tensorflow_package"], v["tensorflow_version"]],
        "extra": v.get("python_extra_packages", []),
        "horovod": v["horovod_version"],
        "env": v["horovod_build_env"],
        "packages": v["wheel_build_packages"],
        "script": BUILD_SCRIPT.read_text(encoding="utf-8"),
        "suite": v["debian_suite"],
        "python": v["python_version"],
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def ensure_wheelhouse(image_tag: str, log: Path, timeout_s: float, ca_files: list[str] | None = None) -> Path:
    """Return the cached wheelhouse folder, building it first if needed.

    Cold: about 6-8 minutes on 2 cores (TensorFlow download, Horovod compile).

    Raises:
        CommandError: the build container failed (its output is in ``log``).
        PhaseTimeout: the build ran past ``timeout_s`` seconds.
    """
    with cache_lock("wheelhouse"):
        return _ensure_wheelhouse(image_tag, log, timeout_s, ca_files)


def _ensure_wheelhouse(image_tag: str, log: Path, timeout_s: float, ca_files: list[str] | None) -> Path:
    versions = load_versions()
    final = cache_dir() / "wheelhouse" / wheelhouse_key(versions)
    if (final / "constraints.txt").is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="build-", dir=final.parent))
    out, ca = work / "out", work / "ca"
    out.mkdir()
    ca.mkdir()
    for path in ca_files if ca_files is not None else glob.glob(HOST_CA_GLOB):
        shutil.copy(path, ca / Path(path).name)
    env = {
        "TF_PACKAGE": versions["tensorflow_package"],
        "TF_VERSION": versions["tensorflow_version"],
        "HOROVOD_VERSION": versions["horovod_version"],
        "BUILD_PACKAGES": " ".join(versions["wheel_build_packages"]),
        "EXTRA_PACKAGES": " ".join(versions.get("python_extra_packages", [])),
        **versions["horovod_build_env"],
    }
    cmd = ["podman", "run", "--rm", *proc.PODMAN_OPTS, "--name", f"refarch-wheel-{work.name}",
           "--label", "refarch.cache=wheelhouse",
           "-v", f"{out}:/out", "-v", f"{ca}:/extra-ca:ro", "-v", f"{BUILD_SCRIPT}:/build.sh:ro"]
    for key, value in env.items():
        cmd += ["-e", f"{key}={value}"]
    cmd += [image_tag, "/bin/sh", "/build.sh"]
    try:
        proc.run(cmd, timeout_s=timeout_s, log=log)
        out.rename(final)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final
