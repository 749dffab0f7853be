"""The role scenarios' runner (refarch roles): which scenarios exist, which
this host skips, bad input, and the failure line taken from Molecule's
output (recorded from real runs in tests/unit/data/molecule/)."""

from pathlib import Path

import pytest
import yaml

from refarch.errors import RefarchError
from refarch.paths import ANSIBLE_DIR
from refarch.tools import roles

DATA = Path(__file__).parent / "data" / "molecule"


def test_every_role_has_a_scenario_in_site_order():
    role_dirs = sorted(p.name for p in (ANSIBLE_DIR / "roles").iterdir() if p.is_dir())
    assert sorted(n for n in roles.scenarios() if roles.platform(n) == "local") == role_dirs
    assert [n for n in roles.scenarios() if roles.platform(n) == "vm"] == ["nfs"]
    assert roles.scenarios()[:2] == ["common", "ca_certificates"] and roles.scenarios()[-2] == "horovod"


def test_a_vm_scenario_without_qemu_is_one_line_before_anything_runs(tmp_path, monkeypatch, capsys):
    from refarch import cli
    from refarch.clouds import vm
    from refarch.errors import PreflightError

    monkeypatch.setenv("REFARCH_RUNS_DIR", str(tmp_path))
    monkeypatch.setattr(roles, "molecule", lambda: "molecule")
    monkeypatch.setattr(vm.shutil, "which", lambda cmd: None if cmd == "qemu-system-x86_64" else f"/usr/bin/{cmd}")
    with pytest.raises(PreflightError, match=r"^the VM platform needs qemu-system-x86_64 \(ci/bootstrap.sh vm"):
        roles.run_scenarios(["nfs"], vm_preflight=vm.preflight)
    # `refarch roles -s nfs` passes the VM platform's preflight to the runner.
    assert cli.main(["roles", "-s", "nfs"]) == 2
    assert "refarch: error: the VM platform needs qemu-system-x86_64" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["cluster_ssh", "shared_storage", "openmpi", "horovod"])
def test_roles_that_span_nodes_get_two_instances(name):
    config = yaml.safe_load((roles.MOLECULE_DIR / name / "molecule.yml").read_text())
    assert [p["name"] for p in config["platforms"]] == ["node1", "node2"]
    assert config["provisioner"]["env"]["REFARCH_MOLECULE_NODES"] == "2"


def test_the_gpu_scenario_is_skipped_without_a_gpu(monkeypatch):
    monkeypatch.setattr(roles, "nvidia_gpus", lambda: 0)
    assert "NVIDIA GPU" in roles.skip_reason("gpu") and roles.skip_reason("common") is None
    outcome = roles.run_scenario("gpu", Path("/nonexistent"))
    assert (outcome.status, outcome.seconds) == ("skipped", 0.0)


def test_an_unknown_scenario_is_one_line_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("REFARCH_RUNS_DIR", str(tmp_path))
    with pytest.raises(RefarchError, match=r"unknown scenario comon: the scenarios are common, ca_certificates"):
        roles.run_scenarios(["comon"])
    assert not list(tmp_path.iterdir())


def test_the_failure_line_names_the_cause():
    verify = roles.failure_line((DATA / "verify-failed.log").read_text())
    assert verify.startswith('fatal: [localhost]: FAILED!') and "test_training_user[node1]" in verify
    converge = roles.failure_line((DATA / "converge-failed.log").read_text())
    assert "fatal: [node1]" in converge and "has no attribute 'packages'" in converge


def test_junit_has_one_case_per_scenario(tmp_path):
    path = roles.write_junit([roles.Outcome("common", "passed", 21.0), roles.Outcome("gpu", "skipped", 0, "no GPU"),
                              roles.Outcome("openmpi", "failed", 30.0, "fatal: [node2]", "x.log")], tmp_path / "j.xml")
    text = path.read_text()
    assert 'tests="3" failures="1" skipped="1"' in text and '<skipped message="no GPU"' in text


def test_a_scenario_that_passed_here_with_the_same_inputs_is_reused_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("REFARCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("REFARCH_ROLES_REUSE", raising=False)
    ran = []
    monkeypatch.setattr(roles, "molecule", lambda: "molecule")

    def molecule_test(cmd, **kw):  # the scenario's processes list what they loaded
        ran.append(cmd)
        Path(kw["env"][roles.rolecache.LOADED_ENV]).write_text("cli\npytest.fixtures\nproc\n")

    monkeypatch.setattr(roles.proc, "run", molecule_test)
    first = roles.run_scenario("common", tmp_path)
    assert first.status == "passed" and not first.reused_from and len(ran) == 1
    again = roles.run_scenario("common", tmp_path)
    assert again.status == "passed" and again.reused_from == tmp_path.name and len(ran) == 1
    assert again.detail.startswith(f"reused from run {tmp_path.name} (key {first.key[:12]}, passed 0.0 h ago")
    text = roles.write_junit([again], tmp_path / "j.xml").read_text()
    assert f'name="reused_from" value="{tmp_path.name}"' in text and "reused from run" in text
    monkeypatch.setenv("REFARCH_ROLES_REUSE", "0")
    assert not roles.run_scenario("common", tmp_path).reused_from and len(ran) == 2


def test_a_scenario_whose_processes_listed_nothing_runs_again_next_time(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("REFARCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("REFARCH_ROLES_REUSE", raising=False)
    ran = []
    monkeypatch.setattr(roles, "molecule", lambda: "molecule")
    monkeypatch.setattr(roles.proc, "run", lambda cmd, **kw: ran.append(cmd))
    roles.run_scenario("common", tmp_path)
    assert "did not list cli, pytest.fixtures: no reuse record" in capsys.readouterr().err
    assert not roles.run_scenario("common", tmp_path).reused_from and len(ran) == 2


def _selection(name: str) -> list[str]:
    """The pytest arguments the scenario's verify runs (resources/verify.yml):
    REFARCH_MOLECULE_PYTEST, else REFARCH_MOLECULE_FILES (default the node
    and cluster checks) with -k REFARCH_MOLECULE_CHECKS."""
    env = yaml.safe_load((roles.MOLECULE_DIR / name / "molecule.yml").read_text())["provisioner"]["env"]
    if env.get("REFARCH_MOLECULE_PYTEST"):
        return env["REFARCH_MOLECULE_PYTEST"].split()
    files = (env.get("REFARCH_MOLECULE_FILES") or "tests/integration/test_nodes.py tests/integration/test_cluster.py")
    return [*files.split(), "-k", env["REFARCH_MOLECULE_CHECKS"]]


@pytest.mark.parametrize("name", roles.scenarios())
def test_every_scenarios_selection_collects_its_checks(name):
    """The review's finding: the gpu scenario selected `test_gpu` among the
    node and cluster checks, which collects nothing.  Each scenario's verify
    (the gpu one included) collects at least one check, by pytest itself."""
    import re
    import subprocess
    import sys

    from refarch.paths import ROOT

    r = subprocess.run([sys.executable, "-m", "pytest", *_selection(name), "--collect-only", "-q",
                        "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    m = re.search(r"^(\d+)(?:/\d+)? tests? collected", r.stdout, re.M)
    assert m and int(m.group(1)) >= 1, f"{name}: its verify selects no check:\n{r.stdout[-800:]}"
    if name == "gpu":
        assert "test_gpu.py::test_gpus_healthy" in r.stdout and "test_nccl_version" in r.stdout


def test_the_verify_fails_a_selected_check_that_skipped_unless_the_scenario_says_why():
    """resources/verify.yml's last assert, rendered by Ansible's own Jinja2
    filters on recorded pytest output."""
    import os
    import subprocess
    import sys
    import tempfile

    from refarch.paths import ROOT

    verify = yaml.safe_load((roles.MOLECULE_DIR / "resources" / "verify.yml").read_text())[0]
    task = next(t for t in verify["tasks"] if t["name"] == "No selected check skipped instead of running")
    out = ["tests/integration/test_nodes.py ..s", "SKIPPED [2] tests/integration/test_nodes.py:244: profile local: "
           "sshfs share is not root-squashed", "2 passed, 2 skipped in 3.1s"]
    play = [{"hosts": "localhost", "gather_facts": False, "connection": "local", "vars": {
        "refarch_run_id": "hvd-x", "refarch_verify": {"stdout_lines": out}}, "tasks": [
        {**task, "vars": {**task["vars"], "refarch_may_skip": "{{ may_skip }}"}}]}]
    playbook = str(Path(sys.executable).with_name("ansible-playbook"))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "play.yml"
        path.write_text(yaml.safe_dump(play))
        results = {}
        for may_skip in ("", "share is not root-squashed"):
            r = subprocess.run([playbook, "-i", "localhost,", str(path), "-e", f"may_skip='{may_skip}'"],
                               capture_output=True, text=True, cwd=ROOT, timeout=120,
                               env={**os.environ, "ANSIBLE_NOCOLOR": "1"})
            results[may_skip] = (r.returncode, r.stdout)
    rc, stdout = results[""]
    assert rc != 0 and "checks of the role skipped instead of running (run hvd-x)" in stdout
    assert "sshfs share is not root-squashed" in stdout
    assert results["share is not root-squashed"][0] == 0, results["share is not root-squashed"][1][-800:]
