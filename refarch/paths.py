"""Where the suite finds its descriptors and keeps caches and run directories."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

#: Repository root (the folder holding ``descriptors/``).
ROOT = Path(__file__).resolve().parent.parent
#: The descriptor tree deployed and validated: the checkout's, or another
#: version's (``$REFARCH_DESCRIPTORS``: refarch compare deploys the baseline
#: from a copy of its tree).
DESCRIPTORS = Path(os.environ.get("REFARCH_DESCRIPTORS") or ROOT / "descriptors")
PROFILES_DIR = DESCRIPTORS / "profiles"
TERRAFORM_DIR = DESCRIPTORS / "terraform"
ANSIBLE_DIR = DESCRIPTORS / "ansible"
VERSIONS_FILE = DESCRIPTORS / "versions.yml"


def cache_dir() -> Path:
    """Build caches (node image inputs, wheelhouses): ``$REFARCH_CACHE_DIR``
    or ``$XDG_CACHE_HOME/refarch`` (default ``~/.cache/refarch``). Teardown
    never removes it."""
    env = os.environ.get("REFARCH_CACHE_DIR")
    if env:
        path = Path(env)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        path = Path(base) / "refarch"
    path.mkdir(parents=True, exist_ok=True)
    return path


def runs_dir() -> Path:
    """Parent of all run directories: ``$REFARCH_RUNS_DIR`` or ``<repo>/runs``."""
    path = Path(os.environ.get("REFARCH_RUNS_DIR") or ROOT / "runs")
    path.mkdir(parents=True, exist_ok=True)
    return path


def load_versions() -> dict:
    """The pins of the built cluster (``descriptors/versions.yml``) as a dict."""
    with open(VERSIONS_FILE, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


@contextmanager
def cache_lock(name: str) -> Iterator[None]:
    """Exclusive lock on ``<cache>/<name>.lock`` so that concurrent runs build
    a cache entry once (the second waits, then finds it)."""
    path = cache_dir() / f"{name}.lock"
    with open(path, "w", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def write_private(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` readable by its owner only (mode 0600 from
    the first byte: credentials, Terraform inputs)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path
