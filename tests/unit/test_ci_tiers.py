"""The suite's CI in two tiers (refarch.ci): the definitions, the keys of the
environment records (one test per kind of input), the scheduler's order and
budget on recorded timings, the release's requirement, GitLab's rules."""

import json
import subprocess
import time
from pathlib import Path

import pytest

from refarch.ci import environments, gitlab, release, reuse, schedule
from refarch.ci.environments import Environment
from refarch.errors import RefarchError
from refarch.paths import ROOT
from refarch.pytest.tools import needs_tool
from refarch.tools import rolecache

TOOLS = {"python": "3.11.2", "terraform": "Terraform v1.11.4"}


@pytest.fixture
def tree(tmp_path):
    """A small checkout: two inputs and two modules of the package."""
    (tmp_path / "descriptors" / "ansible").mkdir(parents=True)
    (tmp_path / "descriptors" / "ansible" / "site.yml").write_text("- hosts: all\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_a(): pass\n")
    (tmp_path / "refarch" / "clouds").mkdir(parents=True)
    (tmp_path / "refarch" / "__init__.py").write_text("")
    (tmp_path / "refarch" / "clouds" / "__init__.py").write_text("")
    (tmp_path / "refarch" / "clouds" / "local.py").write_text("X = 1\n")
    return tmp_path


def env(name="teardown", inputs=("descriptors", "tests/test_a.py"), reference_s=100.0, tier="heavy"):
    return Environment(name=name, tier=tier, tox=name, inputs=inputs, reference_s=reference_s)


def key(tree, tools=TOOLS, modules=("clouds.local",)):
    return reuse.current_key(env(), list(modules), tree, tools=dict(tools))


# --- the definitions ---------------------------------------------------------------------------------------

def test_the_definitions_have_both_tiers_and_every_role_scenario():
    defs = environments.definitions()
    assert defs.names("change") == ["fresh", "faults:checks", "integration", "report", "docs"]
    heavy = defs.names("heavy")
    assert {"faults:figures", "configurability", "teardown", "concurrency", "byhand", "toolset"} <= set(heavy)
    from refarch.tools import roles

    assert {f"molecule:{s}" for s in roles.scenarios() if s != "gpu"} == {n for n in heavy if n.startswith("molecule:")}
    assert defs.budget_s + defs.margin_s <= 3600, "the default run must end within 60 min"


def test_every_tox_environment_named_exists_and_inputs_exist():
    ini = (ROOT / "tox.ini").read_text()
    for e in environments.definitions().environments:
        assert f"[testenv:{e.tox}]" in ini, e.name
        for rel in e.inputs:
            assert rel == "." or (ROOT / rel).exists(), f"{e.name}: input {rel} does not exist"


def test_a_role_scenario_has_the_inputs_of_its_records():
    openmpi = environments.definitions().get("molecule:openmpi")
    assert openmpi.args == ("-s", "openmpi") and openmpi.gitlab == "role-openmpi"
    assert list(openmpi.inputs) == [p.relative_to(ROOT).as_posix() for p in rolecache.scenario_inputs("openmpi")]
    assert "descriptors/ansible/roles/common" in openmpi.inputs and "descriptors/versions.yml" in openmpi.inputs


def test_a_bad_definition_is_one_line(tmp_path):
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "environments.yml").write_text(
        "budget_s: 10\nmargin_s: 1\nmax_age_s: 5\nenvironments:\n  x:\n    tier: nightly\n    tox: x\n"
        "    inputs: [a]\n    reference_s: 1\n")
    with pytest.raises(RefarchError, match=r"environment x: tier: .*'change' or 'heavy'"):
        environments.load(tmp_path)
    with pytest.raises(RefarchError, match="no CI environment 'nope'"):
        environments.definitions().get("nope")


# --- keys: one test per kind of input ----------------------------------------------------------------------

def test_the_key_changes_with_a_declared_input_file(tree):
    before = key(tree)
    (tree / "tests" / "test_a.py").write_text("def test_a(): assert 1\n")
    after = key(tree)
    assert after.key != before.key and after.tree_key != before.tree_key
    assert reuse.differences(before.as_dict(), after) == ["input tests/test_a.py"]


def test_the_key_changes_with_a_file_added_under_a_declared_folder(tree):
    before = key(tree)
    (tree / "descriptors" / "ansible" / "roles").mkdir()
    (tree / "descriptors" / "ansible" / "roles" / "x.yml").write_text("a: 1\n")
    assert key(tree).inputs["descriptors"] != before.inputs["descriptors"]


def test_the_key_changes_with_a_loaded_module_and_not_with_another(tree):
    before = key(tree)
    (tree / "refarch" / "clouds" / "__init__.py").write_text("# not loaded\n")
    assert key(tree).key == before.key
    (tree / "refarch" / "clouds" / "local.py").write_text("X = 2\n")
    after = key(tree)
    assert after.key != before.key and reuse.differences(before.as_dict(), after) == ["module refarch/clouds/local.py"]


def test_the_key_changes_with_a_tool_version_but_not_the_tree_key(tree):
    before = key(tree)
    after = key(tree, tools={**TOOLS, "terraform": "Terraform v1.12.0"})
    assert after.key != before.key and after.tree_key == before.tree_key
    assert reuse.differences(before.as_dict(), after) == [
        "tool terraform (Terraform v1.11.4 -> Terraform v1.12.0)"]


def test_the_key_changes_with_what_the_environment_runs(tree):
    other = Environment(**{**env().model_dump(), "pytest": ("-k", "F3")})
    assert reuse.current_key(other, ["clouds.local"], tree, tools=dict(TOOLS)).key != key(tree).key


def test_the_key_changes_with_the_machine(tree, monkeypatch):
    before = key(tree)
    monkeypatch.setattr(rolecache, "machine_id", lambda: "other/0123")
    assert key(tree).key != before.key and key(tree).tree_key == before.tree_key


def test_the_key_changes_with_the_tox_environments_packages(tree):
    site = tree / ".tox" / "teardown" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "ansible_core-2.17.0.dist-info").mkdir()
    before = reuse.tox_packages("teardown", tree)
    (site / "ansible_core-2.17.0.dist-info").rename(site / "ansible_core-2.18.1.dist-info")
    assert reuse.tox_packages("teardown", tree) != before != "absent"


@needs_tool("git", "git")
def test_ignored_files_are_not_inputs(tree):
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    (tree / ".gitignore").write_text("*.log\n")
    before = key(tree)
    (tree / "descriptors" / "build.log").write_text("noise\n")
    assert key(tree).key == before.key


# --- records and standing ----------------------------------------------------------------------------------

def test_a_pass_is_reused_while_its_key_holds_and_names_why_not_after(tree, tmp_path):
    where = tmp_path / "records"
    e = env()
    reuse.remember(e.name, key(tree), "passed", 321.0, "ci-1", "abc123", where=where)
    stand = reuse.standing(e, 3600, tree, where=where, tools=dict(TOOLS))
    assert stand.reusable and stand.why == "" and stand.last_seconds == 321.0
    assert "passed on tree abc123" in reuse.describe_pass(stand.reusable) and "in run ci-1" in \
        reuse.describe_pass(stand.reusable)
    (tree / "descriptors" / "ansible" / "site.yml").write_text("- hosts: node1\n")
    stand = reuse.standing(e, 3600, tree, where=where, tools=dict(TOOLS))
    assert stand.reusable is None and stand.why == "changed" and stand.changed == ["input descriptors"]


def test_a_failure_an_old_pass_or_an_unreusable_pass_is_not_reused(tree, tmp_path):
    where = tmp_path / "records"
    e = env()
    reuse.remember(e.name, key(tree), "failed", 50.0, "ci-1", "abc", where=where)
    stand = reuse.standing(e, 3600, tree, where=where, tools=dict(TOOLS))
    assert stand.why == "failed" and stand.reusable is None and stand.last_seconds is None
    reuse.remember(e.name, key(tree), "passed", 60.0, "ci-2", "abc", where=where, reusable=False)
    assert reuse.standing(e, 3600, tree, where=where, tools=dict(TOOLS)).why == "unreusable"
    reuse.remember(e.name, key(tree), "passed", 70.0, "ci-3", "abc", where=where, now=time.time() - 7200)
    assert reuse.standing(e, 3600, tree, where=where, tools=dict(TOOLS)).why == "old"


def test_a_failure_after_a_pass_with_the_same_key_is_not_covered_by_the_pass(tree, tmp_path):
    where = tmp_path / "records"
    reuse.remember("teardown", key(tree), "passed", 60.0, "ci-1", "abc", where=where)
    reuse.remember("teardown", key(tree), "failed", 20.0, "ci-2", "abc", where=where)
    stand = reuse.standing(env(), 3600, tree, where=where, tools=dict(TOOLS))
    assert stand.reusable is None and stand.why == "failed" and stand.last_seconds == 60.0


def test_a_run_stopped_at_the_budget_is_expected_to_take_at_least_as_long(tree, tmp_path):
    where = tmp_path / "records"
    reuse.remember("teardown", key(tree), "passed", 60.0, "ci-1", "abc", where=where)
    (tree / "tests" / "test_a.py").write_text("changed\n")
    reuse.remember("teardown", key(tree), "stopped", 900.0, "ci-2", "abc", where=where)
    stand = reuse.standing(env(), 3600, tree, where=where, tools=dict(TOOLS))
    assert stand.why == "stopped" and schedule.expected_s(env(), stand, 1.0)[0] == 900.0


def test_broken_or_older_records_are_skipped(tmp_path):
    where = tmp_path / "records"
    where.mkdir()
    for text in ("[1, 2]", '{"records": null}', '{"records": [{"key": "k"}, 3]}', "not json"):
        (where / "teardown.json").write_text(text)
        assert reuse.history("teardown", where) == []


def test_written_records_under_validation_are_not_inputs_of_the_whole_tree(tree):
    whole = Environment(name="fresh", tier="change", tox="fresh", inputs=(".",), reference_s=1)
    before = reuse.input_hashes(whole, tree)
    (tree / "validation" / "0.2.0").mkdir(parents=True)
    (tree / "validation" / "0.2.0" / "environments.json").write_text("{}")
    assert reuse.input_hashes(whole, tree) == before
    (tree / "validation" / "release-criteria.yml").write_text("records: {}\n")
    assert reuse.input_hashes(whole, tree) != before


def test_a_pass_of_another_machine_is_not_reused(tree, tmp_path, monkeypatch):
    where = tmp_path / "records"
    reuse.remember("teardown", key(tree), "passed", 60.0, "ci-1", "abc", where=where)
    monkeypatch.setattr(rolecache, "machine_id", lambda: "other/0123")
    stand = reuse.standing(env(), 3600, tree, where=where, tools=dict(TOOLS))
    assert stand.reusable is None and stand.why == "never" and stand.last_seconds is None


def test_the_junit_file_is_kept_with_the_record(tree, tmp_path):
    junit = tmp_path / "j.xml"
    junit.write_text("<testsuites/>")
    record = reuse.remember("teardown", key(tree), "passed", 1.0, "ci-1", "abc", junit=junit, where=tmp_path / "r")
    assert Path(record["junit"]).read_text() == "<testsuites/>"


# --- the scheduler on recorded timings ---------------------------------------------------------------------

def stand(name, why, last_seconds=None, finished=0.0):
    s = reuse.Standing(name, why=why, last_seconds=last_seconds)
    if why in ("changed", "old"):
        s.last = {"finished": finished, "key": "k" * 64, "seconds": last_seconds or 1, "commit": "c", "run": "r"}
    if why == "":
        s.reusable = {"key": "r" * 64, "finished": 1.0, "seconds": 5, "commit": "c", "run": "r"}
    return s


def test_the_order_is_changed_then_never_then_oldest_pass():
    envs = [env(n) for n in ("a", "b", "c", "d", "e")]
    heavy = [(envs[0], stand("a", "old", 10, finished=200.0)), (envs[1], stand("b", "never")),
             (envs[2], stand("c", "old", 10, finished=100.0)), (envs[3], stand("d", "changed", 10)),
             (envs[4], stand("e", ""))]
    reused, tried = schedule.candidates(heavy)
    assert [d.env.name for d in reused] == ["e"]
    assert [e.name for e, _s in tried] == ["d", "b", "c", "a"]


def test_each_runs_only_when_its_expected_seconds_fit_what_is_left():
    heavy = [(env("big", reference_s=1000), stand("big", "never")),
             (env("own", reference_s=10), stand("own", "changed", last_seconds=300)),
             (env("small", reference_s=100), stand("small", "never"))]
    decisions = {d.env.name: d for d in schedule.plan(heavy, left_s=500, scale=2.0)}
    # its own time here (300 s) counts, not its reference; then 200 s of the 500 are left
    assert decisions["own"].action == "run" and decisions["own"].expected_s == 300
    assert decisions["small"].action == "run" and decisions["small"].expected_s == 200  # 100 s x 2.0
    assert decisions["big"].action == "pending" and "2000 s" in decisions["big"].why
    assert "did not fit the 200 s left" in decisions["big"].why  # tried after own, before small
    assert all(d.action == "run" for d in schedule.plan(heavy, left_s=0, scale=2.0, run_all=True))


def test_the_machine_scale_comes_from_the_change_tier():
    change = [env("fresh", reference_s=1000, tier="change"), env("integration", reference_s=500, tier="change")]
    assert schedule.machine_scale({"fresh": 1500, "integration": 750}, change) == 1.5
    assert schedule.machine_scale({}, change) == 1.0
    assert schedule.machine_scale({"fresh": 100000}, change) == schedule.SCALE_BOUNDS[1]


def stand_in_tox(root: Path, monkeypatch, script: str):
    """``root/ci/tox`` as a shell ``script`` standing in for tox, the runner
    pointed at ``root`` (its runs and records there, fixed tool versions);
    returns the runner module."""
    from refarch.ci import runner

    fake = root / "ci" / "tox"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text("#!/bin/sh\n" + script)
    fake.chmod(0o755)
    monkeypatch.setattr(runner, "ROOT", root)
    monkeypatch.setenv("REFARCH_RUNS_DIR", str(root / "runs"))
    monkeypatch.setenv("REFARCH_CACHE_DIR", str(root / "cache"))
    monkeypatch.setattr(reuse, "tool_versions", lambda e, root=ROOT: dict(TOOLS))
    return runner


def test_the_runner_stops_a_heavy_environment_past_the_budget_and_keeps_it_pending(tmp_path, monkeypatch):
    """A stand-in tox that sleeps: started within the budget, stopped at the
    budget plus the margin, recorded as stopped, listed as pending."""
    runner = stand_in_tox(tmp_path, monkeypatch, "exec sleep 60\n")
    defs = environments.Definitions(budget_s=1, margin_s=1, max_age_s=10,
                                    environments=(env("slow", inputs=("tox.ini",), reference_s=0.5),))
    started = time.time()
    rc = runner.execute(defs, started, 1.0, [], [], run_all=False)
    out = json.loads((tmp_path / "runs" / "ci-timings.json").read_text())
    assert rc == 0 and time.time() - started < 30
    assert [p["name"] for p in out["pending"]] == ["slow"] and "past the budget" in out["pending"][0]["why"]
    assert reuse.history("slow")[-1]["verdict"] == "stopped"


# --- the release and GitLab --------------------------------------------------------------------------------

def test_the_gate_refuses_a_pending_or_changed_environment(tree, tmp_path, monkeypatch):
    monkeypatch.setattr(reuse, "tool_versions", lambda e, root=ROOT: dict(TOOLS))
    monkeypatch.setenv("REFARCH_CACHE_DIR", str(tmp_path / "cache"))
    a, b = env(), env("b")
    defs = environments.Definitions(budget_s=1, margin_s=1, max_age_s=10, environments=(a, b))
    reuse.remember(a.name, key(tree), "passed", 5.0, "ci-1", "abc")
    path, pending = release.write("0.2.0", defs, tmp_path / "validation", tree)
    assert pending == ["b"]
    assert release.problems("0.2.0", defs, tmp_path / "validation", tree) == [
        "environment b (heavy tier) is pending: never passed on this machine"]
    (tree / "refarch" / "clouds" / "local.py").write_text("X = 3\n")
    found = release.problems("0.2.0", defs, tmp_path / "validation", tree)
    assert "environment teardown passed on tree abc" in found[0] and "(module refarch/clouds/local.py)" in found[0]
    assert "ci/test.sh --all" in release.problems("9.9.9", defs, tmp_path / "validation", tree)[0]


def test_the_gitlab_rules_are_the_environments_inputs():
    assert gitlab.differences(environments.definitions()) == []


def test_gitlab_patterns_match_as_gitlab_globs():
    assert gitlab.matches("descriptors/**/*", "descriptors/ansible/roles/x/tasks/main.yml")
    assert gitlab.matches("**/*", "README.md") and gitlab.matches("tox.ini", "tox.ini")
    assert not gitlab.matches("tests/vm/**/*", "tests/vmx/a.py")
    assert not gitlab.matches("descriptors/ansible/site.yml", "descriptors/ansible/site.yml.bak")


def test_a_second_run_reuses_what_passed_and_reruns_what_an_input_change_reaches(tree, monkeypatch, capsys):
    """Acceptance, with a stand-in tox that lists one module and passes: the
    first run runs both tiers; the second reruns the change tier only and
    says which heavy environments it reused and why; after a change to one
    environment's input, that one runs again and the other is reused."""
    runner = stand_in_tox(tree, monkeypatch, 'echo "$2" >> "$(dirname "$0")/calls"\n'
                                             'printf "clouds.local\\npytest.fixtures\\n" >> "$REFARCH_LOADED_MODULES"\n')
    defs = environments.Definitions(budget_s=600, margin_s=60, max_age_s=3600, environments=(
        Environment(name="fresh", tier="change", tox="fresh", inputs=(".",), reference_s=1, lane=True),
        Environment(name="faults:checks", tier="change", tox="faults", inputs=("tests",), reference_s=1, lane=True),
        Environment(name="report", tier="change", tox="report", inputs=("tests",), reference_s=1),
        Environment(name="molecule:common", tier="heavy", tox="molecule", args=("-s", "common"),
                    inputs=("descriptors",), reference_s=1, junit=False),
        Environment(name="teardown", tier="heavy", tox="teardown", inputs=("tests",), reference_s=1)))
    calls = tree / "ci" / "calls"

    def run():
        calls.write_text("")
        assert runner.execute(defs, time.time(), 600, [], [], run_all=False) == 0
        out = json.loads((tree / "runs" / "ci-timings.json").read_text())
        return sorted(calls.read_text().split()), {e["name"]: e for e in out["environments"]}

    ran, rows = run()
    assert ran == ["faults", "fresh", "molecule", "report", "teardown"]
    assert rows["teardown"]["why"] == "never passed on this machine"
    ran, rows = run()
    assert ran == ["faults", "fresh", "report"]
    assert rows["teardown"]["action"] == "reused" and "inputs unchanged" in rows["teardown"]["why"]
    assert "reused: passed on tree" in rows["molecule:common"]["why"]
    (tree / "descriptors" / "ansible" / "site.yml").write_text("- hosts: node1\n")
    ran, rows = run()
    assert ran == ["faults", "fresh", "molecule", "report"] and rows["teardown"]["action"] == "reused"
    assert rows["molecule:common"]["why"] == "inputs changed since its last pass (input descriptors)"
    assert "reused" in capsys.readouterr().out


@pytest.mark.parametrize("args, env, message", [
    (["--only", "nope"], {}, "no CI environment 'nope'"),
    (["--only", "molecule:nope"], {}, "no CI environment 'molecule:nope'"),
    ([], {"REFARCH_CI_BUDGET_S": "soon"}, "REFARCH_CI_BUDGET_S='soon': give the budget in seconds"),
])
def test_bad_input_to_ci_test_sh_is_one_line_before_the_bootstrap(args, env, message):
    import os

    proc = subprocess.run(["bash", str(ROOT / "ci" / "test.sh"), *args], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=60)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert message in proc.stderr and "bootstrap" not in proc.stdout


@pytest.mark.parametrize("message, attempts, rc", [
    ("scaling.efficiency = 0.64 ratio cannot be judged (an error, never a pass): the machine's speed changed", 2, 0),
    ("test_sshd_effective_settings[node2]: PasswordAuthentication yes", 1, 1),
])
def test_an_unjudged_figure_is_measured_once_more_and_nothing_else_is_retried(tree, monkeypatch, message, attempts,
                                                                              rc):
    # The first call fails with MESSAGE in its JUnit file, the second passes.
    runner = stand_in_tox(tree, monkeypatch,
                          'for a; do case "$a" in --junitxml=*) j=${a#--junitxml=};; esac; done\n'
                          'printf "pytest.fixtures\\n" >> "$REFARCH_LOADED_MODULES"\n'
                          'if [ ! -e "$(dirname "$0")/once" ]; then touch "$(dirname "$0")/once"\n'
                          f'  printf \'<testsuite><testcase name="t"><failure message="%s"/></testcase></testsuite>\' '
                          f'"{message}" > "$j"; exit 1; fi\necho "<testsuite/>" > "$j"\n')
    defs = environments.Definitions(budget_s=600, margin_s=60, max_age_s=3600, environments=(
        Environment(name="integration", tier="change", tox="integration", inputs=("tests",), reference_s=1),))
    assert runner.execute(defs, time.time(), 600, [], [], run_all=False) == rc
    rows = json.loads((tree / "runs" / "ci-timings.json").read_text())["environments"]
    assert [r["action"] for r in rows] == (["retried", "ran"] if attempts == 2 else ["ran"])


def test_the_release_names_a_failure_on_this_tree(tree, tmp_path, monkeypatch):
    monkeypatch.setattr(reuse, "tool_versions", lambda e, root=ROOT: dict(TOOLS))
    monkeypatch.setenv("REFARCH_CACHE_DIR", str(tmp_path / "cache"))
    defs = environments.Definitions(budget_s=1, margin_s=1, max_age_s=10, environments=(env(),))
    reuse.remember("teardown", key(tree), "passed", 5.0, "ci-1", "abc")
    reuse.remember("teardown", key(tree), "failed", 5.0, "ci-2", "abc")
    _path, pending = release.write("0.2.0", defs, tmp_path / "validation", tree)
    assert pending == ["teardown"]
    assert release.problems("0.2.0", defs, tmp_path / "validation", tree) == [
        "environment teardown (heavy tier) is pending: its newest run on this tree, in ci-2, failed"]
