"""The build caches a run leaves on the machine: node images (podman,
``localhost/refarch-node:<hash>``, about 300 MB each) and wheelhouses
(``<cache>/wheelhouse/<key>``, about 600 MB each), one per pin set, and
the VM images of the VM scenarios (``<cache>/vm-image/<key>``, about
1 GB each), and the toolset images (``localhost/refarch-toolset:<version>-<hash>``,
1.8 GB each of which all but the suite's last layers is shared between tags).

:func:`entries` lists them (size, date, whether the current pins use it);
:func:`prune` removes all but the current one and the ``keep`` most recent
others.  An image a container still uses is never removed (podman refuses,
and that is reported), and wheelhouses are pruned under the same lock a
build takes.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from .. import proc
from ..errors import RefarchError
from ..paths import cache_dir, cache_lock
from .image import IMAGE_REPO, image_tag
from .wheelhouse import wheelhouse_key


@dataclass(frozen=True)
class Entry:
    """One cache entry: ``kind`` image or wheelhouse, its ``name`` (tag or
    folder), ``size`` in bytes, ``created`` (seconds since the epoch) and
    whether the current pins use it."""

    kind: str
    name: str
    size: int
    created: float
    current: bool


def _folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def entries() -> list[Entry]:
    """Node images and wheelhouses, newest first within each kind."""
    out = []
    images = json.loads(proc.run(["podman", "images", "--format", "json"], timeout_s=60).stdout or "[]")
    current_tag = image_tag()
    from ..tools.toolset import TOOLSET_REPO, toolset_tag

    try:
        current_toolset = toolset_tag()
    except RefarchError:  # no fit terraform here: no toolset tag is current
        current_toolset = ""
    for img in images:
        for name in img.get("Names") or []:
            for kind, repo, current in (("image", IMAGE_REPO, current_tag), ("toolset", TOOLSET_REPO, current_toolset)):
                if name.startswith(repo + ":"):
                    out.append(Entry(kind, name, int(img.get("Size", 0)), float(img.get("Created", 0)),
                                     name == current))
    root = cache_dir() / "wheelhouse"
    key = wheelhouse_key()
    for path in sorted(root.glob("*")) if root.is_dir() else []:
        if path.is_dir() and (path / "constraints.txt").is_file():
            out.append(Entry("wheelhouse", str(path), _folder_size(path), path.stat().st_mtime, path.name == key))
    from .vmimage import image_key

    vm_root, vm_key = cache_dir() / "vm-image", image_key()
    for path in sorted(vm_root.glob("*")) if vm_root.is_dir() else []:
        if path.is_dir():
            out.append(Entry("vm-image", str(path), _folder_size(path), path.stat().st_mtime, path.name == vm_key))
    return sorted(out, key=lambda e: (e.kind, -e.created))


def prune(keep: int = 1, dry_run: bool = False) -> tuple[list[Entry], list[str]]:
    """Remove every entry but the current one and the ``keep`` newest others
    of each kind.  Returns (removed, problems); an image in use stays and is
    named in problems."""
    removed, problems = [], []
    by_kind: dict[str, list[Entry]] = {}
    for e in entries():
        by_kind.setdefault(e.kind, []).append(e)
    for kind, items in by_kind.items():
        others = [e for e in items if not e.current]
        for e in others[keep:]:
            if dry_run:
                removed.append(e)
                continue
            if kind in ("image", "toolset"):
                r = proc.run(["podman", "rmi", e.name], timeout_s=120, check=False)
                if r.returncode != 0:
                    problems.append(f"{e.name}: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
                    continue
            else:
                with cache_lock(kind):
                    shutil.rmtree(e.name)
            removed.append(e)
    return removed, problems


def describe(e: Entry) -> str:
    """One line: kind, name, size in MB, date, (current)."""
    when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(e.created))
    return f"{e.kind:<11} {e.size / 1e6:>8.0f} MB  {when}  {e.name}{'  (current pins)' if e.current else ''}"
