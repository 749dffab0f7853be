"""Cache listing and pruning offline: podman's image list is recorded, the
wheelhouses are folders in a temporary cache; the current pins' entries
and the newest others stay, an image in use is reported and kept."""

import json
import os
from types import SimpleNamespace

import pytest

from refarch.clouds import caches
from refarch.tools import toolset


@pytest.fixture
def machine(tmp_path, monkeypatch):
    monkeypatch.setenv("REFARCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(caches, "image_tag", lambda: "localhost/refarch-node:cur")
    monkeypatch.setattr(caches, "wheelhouse_key", lambda: "curkey")
    images = [{"Names": [f"localhost/refarch-node:{t}"], "Size": 293_000_000, "Created": c}
              for t, c in (("cur", 300), ("old1", 200), ("old2", 100), ("busy", 50))]
    images += [{"Names": [f"localhost/refarch-toolset:0.1.0-{t}"], "Size": 1_817_000_000, "Created": c}
               for t, c in (("cur", 300), ("old", 200), ("older", 100))]
    monkeypatch.setattr(toolset, "toolset_tag", lambda: "localhost/refarch-toolset:0.1.0-cur")
    images.append({"Names": ["docker.io/library/debian:12"], "Size": 1, "Created": 1})
    calls = []

    def run(cmd, **kwargs):
        calls.append(cmd)
        if cmd[:2] == ["podman", "images"]:
            return SimpleNamespace(returncode=0, stdout=json.dumps(images), stderr="")
        if cmd[:2] == ["podman", "rmi"] and cmd[2].endswith(":busy"):
            return SimpleNamespace(returncode=2, stdout="", stderr="Error: image used by 3f2a: image is in use")
        return SimpleNamespace(returncode=0, stdout="", stderr="")

    monkeypatch.setattr(caches.proc, "run", run)
    for key, mtime in (("curkey", 300), ("oldkey", 200), ("olderkey", 100)):
        folder = tmp_path / "wheelhouse" / key
        folder.mkdir(parents=True)
        (folder / "constraints.txt").write_text("x" * 10)
        os.utime(folder, (mtime, mtime))
    return SimpleNamespace(calls=calls, root=tmp_path)


def test_list_marks_the_current_pins(machine):
    listed = caches.entries()
    assert [e.name.rsplit(":", 1)[-1] for e in listed if e.kind == "image"] == ["cur", "old1", "old2", "busy"]
    assert [e.current for e in listed if e.kind == "wheelhouse"] == [True, False, False]
    assert [(e.name.rsplit("-", 1)[-1], e.current) for e in listed if e.kind == "toolset"] == [
        ("cur", True), ("old", False), ("older", False)]


def test_prune_keeps_current_and_newest_and_reports_images_in_use(machine):
    removed, problems = caches.prune(keep=1)
    assert sorted(e.name.rsplit("/", 1)[-1] for e in removed) == ["olderkey", "refarch-node:old2",
                                                                    "refarch-toolset:0.1.0-older"]
    assert problems and "refarch-node:busy" in problems[0] and "in use" in problems[0]
    assert not (machine.root / "wheelhouse" / "olderkey").exists()
    assert (machine.root / "wheelhouse" / "curkey").exists() and (machine.root / "wheelhouse" / "oldkey").exists()


def test_dry_run_removes_nothing(machine):
    removed, _ = caches.prune(keep=0, dry_run=True)
    assert len(removed) == 7
    assert not any(c[:2] == ["podman", "rmi"] for c in machine.calls)
    assert (machine.root / "wheelhouse" / "olderkey").exists()
