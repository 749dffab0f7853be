"""Role-scenario results are reused only with the same inputs, on the same
machine, within a day, and say so (refarch.rolecache)."""

import time

import pytest

from refarch import rolecache


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.setenv("REFARCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("REFARCH_ROLES_REUSE", raising=False)
    root = tmp_path / "checkout"
    for rel in ["descriptors/ansible/molecule/openmpi/molecule.yml", "descriptors/ansible/roles/common/tasks/main.yml",
                "descriptors/ansible/roles/openmpi/tasks/main.yml", "descriptors/ansible/roles/horovod/tasks/main.yml",
                "refarch/checks.py", "tests/integration/test_nodes.py", "descriptors/versions.yml"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel}\n")
    (root / "tests/integration/test_nodes.py").write_text("from refarch import checks\n")
    (root / "refarch/checks.py").write_text("from .proc import run\n")
    for module in ("proc", "faults"):
        (root / f"refarch/{module}.py").write_text(f"# {module}\n")
    return root


def test_the_key_follows_the_role_the_roles_before_it_and_the_suite_not_the_roles_after(tree):
    key = rolecache.scenario_key("openmpi", tree)
    (tree / "descriptors/ansible/roles/horovod/tasks/main.yml").write_text("# later role changed\n")
    assert rolecache.scenario_key("openmpi", tree) == key
    for rel in ["descriptors/ansible/roles/common/tasks/main.yml", "descriptors/ansible/roles/openmpi/tasks/main.yml",
                "refarch/checks.py", "tests/integration/test_nodes.py", "descriptors/versions.yml",
                "descriptors/ansible/molecule/openmpi/molecule.yml"]:
        (tree / rel).write_text("# changed\n")
        new = rolecache.scenario_key("openmpi", tree)
        assert new != key, f"{rel} changed but the key did not"
        key = new


def test_the_key_follows_the_suite_code_a_scenario_loads_not_the_rest(tree):
    """checks.py is imported by the verify checks and imports proc.py: both
    count; faults.py is imported by nothing a scenario runs."""
    assert [p.name for p in rolecache.suite_modules(tree)] == ["checks.py", "proc.py"]
    key = rolecache.scenario_key("openmpi", tree)
    (tree / "refarch/faults.py").write_text("# another fault case\n")
    assert rolecache.scenario_key("openmpi", tree) == key
    (tree / "refarch/proc.py").write_text("# changed\n")
    assert rolecache.scenario_key("openmpi", tree) != key


def test_a_pass_is_reused_on_this_machine_within_a_day_only(tree, monkeypatch):
    key = rolecache.scenario_key("openmpi", tree)
    assert rolecache.lookup("openmpi", key) is None
    rolecache.remember("openmpi", key, "roles-20261130-120000", 33.4, "runs/roles-20261130-120000/openmpi.log")
    record = rolecache.lookup("openmpi", key)
    assert record["run"] == "roles-20261130-120000"
    assert rolecache.describe(record, now=record["passed_at"] + 3 * 3600).startswith(
        f"reused from run roles-20261130-120000 (key {key[:12]}, passed 3.0 h ago in 33 s)")
    assert rolecache.lookup("openmpi", key, now=time.time() + rolecache.MAX_AGE_S + 60) is None
    assert rolecache.lookup("openmpi", "0" * 64) is None
    monkeypatch.setenv("REFARCH_ROLES_REUSE", "0")
    assert rolecache.lookup("openmpi", key) is None
    monkeypatch.delenv("REFARCH_ROLES_REUSE")
    monkeypatch.setattr(rolecache, "machine_id", lambda: "another-host/0123")
    assert rolecache.lookup("openmpi", key) is None
