"""Role-scenario results are reused only with the same inputs, on the same
machine, within a day, and say so (refarch.tools.rolecache)."""

import time

import pytest

from refarch.tools import rolecache


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.setenv("REFARCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("REFARCH_ROLES_REUSE", raising=False)
    root = tmp_path / "checkout"
    for rel in ["descriptors/ansible/molecule/openmpi/molecule.yml", "descriptors/ansible/roles/common/tasks/main.yml",
                "descriptors/ansible/roles/openmpi/tasks/main.yml", "descriptors/ansible/roles/horovod/tasks/main.yml",
                "refarch/judge/checks.py", "tests/integration/test_nodes.py", "descriptors/versions.yml"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel}\n")
    (root / "tests/integration/test_nodes.py").write_text("from refarch import checks\n")
    (root / "refarch/judge/checks.py").write_text("from .proc import run\n")
    for module in ("proc", "faults"):
        (root / f"refarch/{module}.py").write_text(f"# {module}\n")
    return root


def test_the_key_follows_the_role_the_roles_before_it_and_the_suite_not_the_roles_after(tree):
    key = rolecache.scenario_key("openmpi", tree)
    (tree / "descriptors/ansible/roles/horovod/tasks/main.yml").write_text("# later role changed\n")
    assert rolecache.scenario_key("openmpi", tree) == key
    for rel in ["descriptors/ansible/roles/common/tasks/main.yml", "descriptors/ansible/roles/openmpi/tasks/main.yml",
                "tests/integration/test_nodes.py", "descriptors/versions.yml",
                "descriptors/ansible/molecule/openmpi/molecule.yml"]:
        (tree / rel).write_text("# changed\n")
        new = rolecache.scenario_key("openmpi", tree)
        assert new != key, f"{rel} changed but the key did not"
        key = new


def _loaded(tree, *names):
    for name in ("cli", "pytest.fixtures", *names):
        path = rolecache.module_path(name, tree)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {name}\n")
    return rolecache.module_hashes(["cli", "pytest.fixtures", *names], tree)


def test_the_suite_code_counts_as_far_as_the_scenarios_processes_loaded_it(tree):
    """proc.py was loaded by the scenario's processes: a change to it reruns
    the scenario, naming it; faults.py was not: a change to it reruns
    nothing.  Neither is in the key itself."""
    key = rolecache.scenario_key("openmpi", tree)
    rolecache.remember("openmpi", key, "roles-20261130-120000", 33.4, "openmpi.log", _loaded(tree, "proc"))
    (tree / "refarch/faults.py").write_text("# another fault case\n")
    assert rolecache.scenario_key("openmpi", tree) == key
    assert rolecache.lookup("openmpi", key, root=tree)["run"] == "roles-20261130-120000"
    (tree / "refarch/proc.py").write_text("# changed\n")
    assert rolecache.scenario_key("openmpi", tree) == key
    assert rolecache.check("openmpi", key, root=tree) == (
        None, "refarch/proc.py changed since its pass in run roles-20261130-120000")
    (tree / "refarch/proc.py").unlink()
    assert rolecache.lookup("openmpi", key, root=tree) is None


def test_the_templates_count_where_the_report_was_loaded(tree):
    """The package's templates are read only through refarch.report.html: a new
    section of the HTML report reruns a scenario whose processes rendered a
    report, and no other; neither is in the key itself."""
    (tree / "refarch/report/templates").mkdir(parents=True)
    (tree / "refarch/report/templates/report.html.j2").write_text("<p>{{ verdict }}</p>\n")
    key = rolecache.scenario_key("openmpi", tree)
    rolecache.remember("openmpi", key, "roles-20261130-120000", 33.4, "openmpi.log", _loaded(tree, "proc"))
    rolecache.remember("horovod", key, "roles-20261130-120000", 40.1, "horovod.log", _loaded(tree, "report.html"))
    (tree / "refarch/report/templates/trend.html.j2").write_text("<h2>Side by side</h2>\n")
    assert rolecache.scenario_key("openmpi", tree) == key
    assert rolecache.lookup("openmpi", key, root=tree)["run"] == "roles-20261130-120000"
    assert rolecache.check("horovod", key, root=tree) == (
        None, "refarch/report/html.py (or refarch/report/templates/) changed since its pass in run roles-20261130-120000")


def test_a_run_whose_processes_listed_no_cli_or_plugin_leaves_no_record(tree, tmp_path):
    listed = tmp_path / "openmpi.modules"
    listed.write_text("proc\ncli\n")
    key = rolecache.scenario_key("openmpi", tree)
    with pytest.raises(ValueError, match="did not list pytest.fixtures: no reuse record"):
        rolecache.record_modules(rolecache.loaded_modules(listed), {"pytest.fixtures", "tools.roles"}, tree)
    with pytest.raises(ValueError, match="did not list pytest.fixtures: no reuse record"):
        rolecache.remember("openmpi", key, "roles-x", 1.0, "x.log", rolecache.module_hashes({"cli"}, tree))
    assert rolecache.loaded_modules(tmp_path / "nothing.modules") == set()
    assert rolecache.lookup("openmpi", key, root=tree) is None


def test_the_package_lists_the_modules_a_process_loaded_when_it_exits(tmp_path):
    """What each scenario process does (refarch/__init__.py): a real child
    Python that imports refarch.errors appends it, the package and the
    entry module to the file REFARCH_LOADED_MODULES names."""
    import os
    import subprocess
    import sys

    from refarch.paths import ROOT

    listed = tmp_path / "loaded"
    env = {**os.environ, rolecache.LOADED_ENV: str(listed), "PYTHONPATH": str(ROOT)}
    for _ in range(2):
        subprocess.run([sys.executable, "-c", "import refarch.errors, refarch.clouds.protocol"], env=env, check=True,
                       cwd=tmp_path)
    assert {"errors", "clouds", "clouds.protocol", "__init__", "__main__"} <= rolecache.loaded_modules(listed)
    assert listed.read_text().count("errors\n") == 2  # appended, not overwritten


def test_a_pass_is_reused_on_this_machine_within_a_day_only(tree, monkeypatch):
    key = rolecache.scenario_key("openmpi", tree)
    assert rolecache.lookup("openmpi", key, root=tree) is None
    rolecache.remember("openmpi", key, "roles-20261130-120000", 33.4, "runs/roles-20261130-120000/openmpi.log",
                       _loaded(tree))
    record = rolecache.lookup("openmpi", key, root=tree)
    assert record["run"] == "roles-20261130-120000"
    assert rolecache.describe(record, now=record["passed_at"] + 3 * 3600).startswith(
        f"reused from run roles-20261130-120000 (key {key[:12]}, passed 3.0 h ago in 33 s)")
    assert rolecache.check("openmpi", key, now=time.time() + rolecache.MAX_AGE_S + 60, root=tree) == (
        None, "its pass in run roles-20261130-120000 is older than 24 h")
    assert rolecache.lookup("openmpi", "0" * 64, root=tree) is None
    monkeypatch.setenv("REFARCH_ROLES_REUSE", "0")
    assert rolecache.lookup("openmpi", key, root=tree) is None
    monkeypatch.delenv("REFARCH_ROLES_REUSE")
    monkeypatch.setattr(rolecache, "machine_id", lambda: "another-host/0123")
    assert rolecache.lookup("openmpi", key, root=tree) is None


def test_module_names_and_files_map_both_ways(tree):
    """Dotted names below the package, as the processes list them, and the
    files the records key: modules and sub-packages."""
    (tree / "refarch/clouds").mkdir(parents=True)
    assert rolecache.module_path("clouds.local", tree) == tree / "refarch/clouds/local.py"
    assert rolecache.module_path("clouds", tree) == tree / "refarch/clouds/__init__.py"
    assert rolecache.module_name("refarch/clouds/local.py") == "clouds.local"
    assert rolecache.module_name("refarch/clouds/__init__.py") == "clouds"
    assert rolecache.module_name("refarch/__init__.py") == "__init__"


TOOLS = {"molecule": "26.10.0", "ansible-core": "2.19.14", "podman": "podman version 5.4.2",
         "terraform": "Terraform v1.11.4", "qemu": "QEMU emulator version 7.2.15"}


def test_the_key_follows_the_tools_that_run_the_scenario(tree):
    key = rolecache.scenario_key("openmpi", tree, tools=TOOLS)
    assert rolecache.scenario_key("openmpi", tree, tools=dict(TOOLS)) == key
    for tool, other in (("molecule", "26.11.0"), ("ansible-core", "2.20.0"), ("podman", "podman version 5.5.0"),
                        ("terraform", "Terraform v1.12.0"), ("qemu", "QEMU emulator version 8.0.0")):
        assert rolecache.scenario_key("openmpi", tree, tools={**TOOLS, tool: other}) != key, tool
    assert set(rolecache.tool_versions()) == set(TOOLS)


def test_the_key_reads_the_descriptor_tree_molecule_runs(tree, tmp_path):
    """Molecule runs $REFARCH_DESCRIPTORS/ansible: the key hashes that
    tree, under the same names, not the checkout's descriptors."""
    import shutil

    other = tmp_path / "other-descriptors"
    shutil.copytree(tree / "descriptors", other)
    key = rolecache.scenario_key("openmpi", tree, tools=TOOLS)
    assert rolecache.scenario_key("openmpi", tree, other, tools=TOOLS) == key
    (other / "ansible/roles/openmpi/tasks/main.yml").write_text("# the tree Molecule ran changed\n")
    assert rolecache.scenario_key("openmpi", tree, other, tools=TOOLS) != key
    assert rolecache.scenario_key("openmpi", tree, tools=TOOLS) == key


def test_the_runners_own_modules_at_any_depth_void_a_record(tree):
    """The runner (refarch.tools.roles, refarch.tools.rolecache) decides how
    a scenario runs: a change to it reruns the scenario."""
    from refarch.tools import roles

    runner = roles._runner_modules()
    assert {"tools.roles", "tools.rolecache"} <= runner
    key = rolecache.scenario_key("openmpi", tree, tools=TOOLS)
    modules = _loaded(tree, "tools.roles")
    assert "refarch/tools/roles.py" in modules
    rolecache.remember("openmpi", key, "roles-20261205-120000", 30.0, "openmpi.log", modules)
    assert rolecache.lookup("openmpi", key, root=tree)["run"] == "roles-20261205-120000"
    (tree / "refarch/tools/roles.py").write_text("# the runner changed\n")
    assert rolecache.check("openmpi", key, root=tree) == (
        None, "refarch/tools/roles.py changed since its pass in run roles-20261205-120000")
