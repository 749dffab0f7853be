"""The architecture's version and the identity of the descriptors it names.

``descriptors/VERSION`` holds the architecture version (a semantic version,
<https://semver.org/>); ``descriptors/CHANGELOG.md`` says what changed in
each. A validation record and a release name a version *and* the exact
descriptors validated: the git tree id of ``descriptors/`` as it is on
disk (what ``git rev-parse HEAD:descriptors`` prints for a clean
checkout), or a sha256 of the files when the tree is not in git.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .errors import RefarchError
from .paths import DESCRIPTORS, ROOT

VERSION_FILE = DESCRIPTORS / "VERSION"
#: semver.org 2.0.0's grammar (no build metadata; pre-release allowed).
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$")


def parse_version(text: str) -> tuple:
    """A sort key for a semantic version ``text`` (``1.2.3`` or
    ``1.2.3-rc.1``; a pre-release sorts before its release).

    Raises:
        RefarchError: ``text`` is not a semantic version.
    """
    m = SEMVER.match(text.strip())
    if not m:
        raise RefarchError(f"{text!r} is not a semantic version (MAJOR.MINOR.PATCH, e.g. 1.4.0)")
    major, minor, patch, pre = m.groups()
    pre_key = tuple((0, int(p)) if p.isdigit() else (1, p) for p in pre.split(".")) if pre else ((2,),)
    return (int(major), int(minor), int(patch), pre_key)


def architecture_version(path: Path = VERSION_FILE) -> str:
    """The version in ``descriptors/VERSION``.

    Raises:
        RefarchError: the file is missing or holds no semantic version.
    """
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise RefarchError(f"{path}: cannot read the architecture version ({exc.strerror})") from None
    parse_version(text)
    return text


@dataclass(frozen=True)
class TreeHash:
    """Identity of a descriptor tree: ``kind`` is ``git-tree`` (the git tree
    id, 40 hex chars) or ``sha256`` (of sorted paths and file contents)."""

    value: str
    kind: str

    def as_dict(self) -> dict:
        return {"tree_hash": self.value, "tree_hash_kind": self.kind}


def git(*args: str, env: dict | None = None, cwd: Path = ROOT, timeout_s: float = 60) -> str:
    """``git ARGS`` in ``cwd``; its stdout, stripped.

    Raises:
        subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError.
    """
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True, timeout=timeout_s).stdout.strip()


def descriptor_tree_hash(descriptors: Path = DESCRIPTORS) -> TreeHash:
    """The git tree id of ``descriptors`` as it is on disk, uncommitted
    changes included and ignored files (build outputs) excluded: built in a
    throwaway index, so the checkout's own index is not touched. Outside a
    git work tree: a sha256 over every file's relative path and bytes."""
    try:
        top = Path(git("rev-parse", "--show-toplevel", cwd=descriptors))
        prefix = descriptors.resolve().relative_to(top.resolve()).as_posix()
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
            git("add", "-A", "--", prefix, env=env, cwd=top)
            return TreeHash(git("write-tree", f"--prefix={prefix}/", env=env, cwd=top), "git-tree")
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired, ValueError):
        pass
    digest = hashlib.sha256()
    for path in sorted(p for p in descriptors.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(descriptors).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return TreeHash(digest.hexdigest(), "sha256")


def commit() -> str | None:
    """The checkout's HEAD commit, with ``-dirty`` when tracked files
    changed; None outside git."""
    try:
        head = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return None
    return head + ("-dirty" if dirty else "")


#: What judges a run (relative to the checkout): the suite's code and
#: checks, the profiles' references and the release criteria.  A record
#: carries their hash (:func:`judge_hash`) and the gate reports a record
#: made by another judge.
JUDGE_PATHS = ("refarch", "tests", "descriptors/profiles", "validation/release-criteria.yml")


def judge_hash(root: Path = ROOT) -> str:
    """sha256 over the relative path and bytes of every file of
    :data:`JUDGE_PATHS` (what git lists, tracked or untracked but not
    ignored; outside git every file but ``__pycache__``)."""
    try:
        listed = git("ls-files", "-co", "--exclude-standard", "-z", "--", *JUDGE_PATHS, cwd=root).split("\0")
        names = sorted({n for n in listed if n and (root / n).is_file()})
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        names = sorted({p.relative_to(root).as_posix() for base in JUDGE_PATHS
                        for p in ([root / base] if (root / base).is_file() else (root / base).rglob("*"))
                        if p.is_file() and "__pycache__" not in p.parts})
    digest = hashlib.sha256()
    for name in names:
        digest.update(name.encode() + b"\0" + hashlib.sha256((root / name).read_bytes()).digest())
    return digest.hexdigest()


def meminfo(field: str) -> int:
    """``field`` of /proc/meminfo (``MemTotal``, ``MemAvailable``) in bytes;
    0 when unreadable or absent."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def machine() -> dict:
    """What a figure measured here depends on: ``cpu_model`` (/proc/cpuinfo),
    ``cores`` (logical CPUs), ``memory_bytes`` (MemTotal), ``kernel``
    (uname -r).  Absolute figures of two records are compared only when
    these are equal."""
    model = "unknown"
    try:
        model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), model)
    except OSError:
        pass
    return {"cpu_model": model, "cores": os.cpu_count() or 0, "memory_bytes": meminfo("MemTotal"),
            "kernel": platform.release()}


#: Python packages of the suite whose versions go into the results and records.
SUITE_PACKAGES = ("pytest", "pytest-testinfra", "ansible-core", "tftest", "openstacksdk", "python-gitlab")


@functools.cache
def tool_versions() -> dict[str, str]:
    """Versions of the tools that ran the validation: Python, the suite's
    packages (importlib.metadata), and the ``terraform`` and ``podman``
    commands when present ("absent" otherwise). Computed once per process."""
    out = {"python": platform.python_version()}
    for name in SUITE_PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "absent"
    for name, cmd in (("terraform", ["terraform", "version", "-json"]),
                      ("podman", ["podman", "version", "--format", "{{.Client.Version}}"])):
        try:
            text = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=True).stdout
        except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
            out[name] = "absent"
            continue
        out[name] = json.loads(text)["terraform_version"] if name == "terraform" else text.strip()
    return out
