"""The toolset image (refarch/tools/toolset.py): its tag follows every input, an
existing tag is not built again, a missing podman is one line, and a stage
runs tox.ini's own commands."""

import shutil
import subprocess

import pytest

from refarch import cli, proc
from refarch.errors import RefarchError
from refarch.paths import ROOT
from refarch.tools import toolset

TERRAFORM = ("1.11.4", "0" * 64)
#: Inputs of a fake image.
INPUTS = {"version": "0.1.0", "packages": ["git", "python3"]}


@pytest.fixture
def tree(tmp_path):
    """The inputs of a tag in a folder of their own (not in git)."""
    for rel in ("pyproject.toml", "descriptors/VERSION", "descriptors/versions.yml", "ci/host-commands.tsv",
                "tox.ini", *(f"ci/toolset/{name}" for name in (*toolset.LOCKS, "Containerfile"))):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    return tmp_path


def tag_of(root):
    return toolset.toolset_tag(toolset.toolset_inputs(root, terraform=TERRAFORM))


def edit(path, old, new):
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_the_tag_names_the_architecture_version_and_is_stable(tree):
    version = (tree / "descriptors" / "VERSION").read_text().strip()
    tag = tag_of(tree)
    assert tag.startswith(f"localhost/refarch-toolset:{version}-") and len(tag.rsplit("-", 1)[1]) == 12
    assert tag_of(tree) == tag


@pytest.mark.parametrize("path, old, new", [
    ("pyproject.toml", '"ruff>=0.5"', '"ruff>=0.6"'),
    ("descriptors/versions.yml", 'horovod_version: "0.28.1"', 'horovod_version: "0.28.0"'),
    ("ci/toolset/requirements.txt", "ruff==", "ruff==0.0.1\n# was ruff=="),
    ("ci/toolset/checkov.txt", "checkov==", "checkov==0.0.1\n# was checkov=="),
    ("ci/host-commands.tsv", "rsync\trsync\t", "rsync\trsync-ng\t"),
], ids=["pyproject pin", "descriptor pin", "lock", "checkov lock", "debian package"])
def test_the_tag_changes_when_a_pin_changes(tree, path, old, new):
    before = tag_of(tree)
    edit(tree / path, old, new)
    assert tag_of(tree) != before


def test_the_tag_changes_with_terraform_and_the_suite(tree):
    before = tag_of(tree)
    assert toolset.toolset_tag(toolset.toolset_inputs(tree, terraform=("1.11.5", "1" * 64))) != before
    (tree / "refarch").mkdir()
    (tree / "refarch" / "new.py").write_text("X = 1\n")
    assert tag_of(tree) != before


def test_a_file_gone_before_it_is_read_is_left_out_and_the_context_is_the_snapshot(tree, tmp_path, monkeypatch):
    # Other runs in the same checkout write and remove files while the
    # image builds: the tag and the suite layer come from one reading.
    (tree / "refarch").mkdir()
    (tree / "refarch" / "kept.py").write_text("X = 1\n")
    (tree / "refarch" / "run.sh").write_text("#!/bin/sh\n")
    (tree / "refarch" / "run.sh").chmod(0o755)
    monkeypatch.setattr(toolset, "source_files", lambda root: ["refarch/gone.py", "refarch/kept.py", "refarch/run.sh"])
    sources = toolset.snapshot_sources(tree)
    assert list(sources) == ["refarch/kept.py", "refarch/run.sh"]
    (tree / "refarch" / "kept.py").write_text("X = 2\n")  # changed after the reading
    (tree / "refarch" / "run.sh").unlink()  # and gone
    monkeypatch.setattr(toolset, "ROOT", tree)
    work = tmp_path / "context"
    work.mkdir()
    toolset._context(work, tree / "tox.ini", sources)
    assert (work / "src" / "refarch" / "kept.py").read_text() == "X = 1\n"
    assert (work / "src" / "refarch" / "run.sh").stat().st_mode & 0o111


def test_the_packages_come_from_the_host_command_table():
    packages = toolset.debian_packages()
    assert {"git", "bash", "python3", "python3-venv", "openssh-client", "rsync"} <= set(packages)
    assert "nmap" in packages and "-" not in packages and "chromium" not in packages and "podman" not in packages


class FakePodman:
    """proc.run stand-in: records every command; ``podman image exists``
    answers ``exists``."""

    def __init__(self, exists):
        self.exists, self.calls = exists, []

    def __call__(self, cmd, **_kw):
        self.calls.append(list(cmd))
        rc = 0 if cmd[:3] != ["podman", "image", "exists"] or self.exists else 1
        return subprocess.CompletedProcess(list(cmd), rc, "", "")


@pytest.fixture
def podman(monkeypatch, tmp_path):
    monkeypatch.setenv("REFARCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(toolset.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(toolset, "toolset_inputs", lambda *a, **k: dict(INPUTS))
    monkeypatch.setattr(toolset, "ensure_fresh_image", lambda log, **kw: "localhost/refarch-fresh:bookworm-2")
    monkeypatch.setattr(toolset, "ensure_wheels", lambda log, timeout_s=0: ROOT)
    monkeypatch.setattr(toolset, "terraform_binary", lambda: (ROOT / "tox.ini", "1.11.4"))
    monkeypatch.setattr(toolset, "snapshot_sources", lambda root=ROOT: {})
    monkeypatch.setattr(toolset, "_context", lambda work, terraform, sources: None)

    def make(exists):
        fake = FakePodman(exists)
        monkeypatch.setattr(proc, "run", fake)
        return fake
    return make


def test_the_build_is_skipped_when_the_tag_exists(podman, tmp_path):
    fake = podman(exists=True)
    tag, built = toolset.ensure_toolset(tmp_path / "log")
    assert tag == toolset.toolset_tag(INPUTS) and built is False
    assert [c[:2] for c in fake.calls] == [["podman", "image"]]


def test_a_missing_tag_is_built_and_force_builds_again(podman, tmp_path):
    fake = podman(exists=False)
    tag, built = toolset.ensure_toolset(tmp_path / "log")
    build = [c for c in fake.calls if c[:2] == ["podman", "build"]]
    assert built and len(build) == 1 and build[0][build[0].index("--tag") + 1] == tag
    assert "--no-cache" not in build[0] and "BASE=localhost/refarch-fresh:bookworm-2" in build[0]
    fake = podman(exists=True)
    assert toolset.ensure_toolset(tmp_path / "log", force=True) == (tag, True)
    assert [c for c in fake.calls if c[:2] == ["podman", "build"]][0].count("--no-cache") == 1


def test_the_cli_prints_the_tag_of_a_cached_image(podman, capsys):
    podman(exists=True)
    assert cli.main(["toolset", "build"]) == 0
    assert capsys.readouterr().out == toolset.toolset_tag(INPUTS) + "\n"


def test_a_missing_podman_is_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("REFARCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(toolset.shutil, "which", lambda name: None)
    with pytest.raises(RefarchError) as exc:
        toolset.ensure_toolset(ROOT / "unused.log")
    assert "podman is not on PATH" in str(exc.value) and "\n" not in str(exc.value)
    assert cli.main(["toolset", "build"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("refarch: error: podman is not on PATH") and err.count("\n") == 1


def test_an_unfit_terraform_is_one_line(monkeypatch):
    monkeypatch.setattr(toolset.shutil, "which", lambda name: "/usr/local/bin/terraform")
    monkeypatch.setattr(toolset.version, "tool_versions", lambda: {"terraform": "1.3.9", "podman": "4.3.1"})
    with pytest.raises(RefarchError, match=r"Terraform 1\.3\.9; the descriptors need >= 1\.5, < 2$"):
        toolset.terraform_binary()


def test_a_stage_runs_tox_ini_commands_with_posargs(tree):
    commands, setenv = toolset.stage_commands("unit", ["-k", "toolset"], root=tree)
    assert commands == [["pytest", "tests/unit", "-k", "toolset"]]
    assert setenv["ANSIBLE_CONFIG"] == f"{tree}/descriptors/ansible/ansible.cfg"
    lint, _ = toolset.stage_commands("lint", root=tree)
    assert ["bash", "-c", "cd descriptors/ansible && ansible-lint --profile production site.yml molecule/"] in lint
    assert ["terraform", "fmt", "-check", "-recursive", "descriptors/terraform"] in lint


def test_an_unknown_stage_is_one_line(tree):
    with pytest.raises(RefarchError, match=r"^tox.ini has no environment 'nope' with commands \(known: .*lint"):
        toolset.stage_commands("nope", root=tree)
