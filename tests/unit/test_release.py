"""Architecture version, validation records and the release gate, on the
results of real runs (tests/unit/data/records/)."""

import copy
import json
import subprocess
from pathlib import Path

import pytest

from refarch import cli, gate, properties, records, version
from refarch.errors import RefarchError
from refarch.paths import ROOT

DATA = Path(__file__).parent / "data" / "records"
TREE = version.TreeHash("1f" * 20, "git-tree")
POLICY = gate.Policy.model_validate({
    "records": {
        "local": {"must_pass": ["scaling.efficiency", "convergence.ranks_diverged", "availability.recovery_s",
                               "exposure.outside_open_ports"]},
        "local-3nodes": {"must_pass": ["scaling.efficiency", "communication.busbw_to_tcp"]},
    },
    "may_warn": ["scaling.efficiency"],
    "regression": {"on_regression": "fail", "tolerances": {
        "images_per_sec": {"relative": 0.15, "better": "higher"},
        "availability.recovery_s": {"relative": 1.0, "absolute": 1.0, "better": "lower"}}},
})


def run(name: str, tree: version.TreeHash = TREE, ver: str = "0.2.0", overrides=None) -> dict:
    data = json.loads((DATA / f"{name}.json").read_text())
    # The three runs were made days apart, with different pins: the tests give them one tree.
    data.update(tree.as_dict(), architecture_version=ver, overrides=overrides or {}, tools={"python": "3.11.7"},
                pins_hash="0123456789abcdef")
    return data


def records_for(root: Path, ver: str = "0.2.0", tree=TREE, main=None) -> Path:
    local = records.build_record([main or run("main-local", tree, ver), run("availability-local", tree, ver)])
    three = records.build_record([run("configurability-3nodes", tree, ver, {"nodes.count": 3})], "local-3nodes")
    records.write_record(local, root)
    records.write_record(three, root)
    return root


def test_version_file_is_a_semantic_version_and_sorts_prereleases_first():
    assert version.architecture_version() == (ROOT / "descriptors" / "VERSION").read_text().strip()
    assert version.parse_version("1.10.0") > version.parse_version("1.9.3")
    assert version.parse_version("1.0.0-rc.1") < version.parse_version("1.0.0")
    with pytest.raises(RefarchError, match="not a semantic version"):
        version.parse_version("1.0")


def test_tree_hash_is_git_tree_id_of_descriptors_on_disk(tmp_path):
    repo = tmp_path / "repo"
    (repo / "descriptors").mkdir(parents=True)
    (repo / "descriptors" / "VERSION").write_text("0.1.0\n")
    (repo / ".gitignore").write_text("build/\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "v"], check=True)
    committed = subprocess.run([*git, "rev-parse", "HEAD:descriptors"], check=True, capture_output=True,
                               text=True).stdout.strip()
    (repo / "descriptors" / "build").mkdir()
    (repo / "descriptors" / "build" / "out.whl").write_text("ignored build output")
    assert version.descriptor_tree_hash(repo / "descriptors") == version.TreeHash(committed, "git-tree")
    (repo / "descriptors" / "VERSION").write_text("0.2.0\n")  # an uncommitted change counts
    changed = version.descriptor_tree_hash(repo / "descriptors")
    assert changed.kind == "git-tree" and changed.value != committed
    assert subprocess.run([*git, "diff", "--cached", "--quiet"]).returncode == 0  # own index untouched
    plain = tmp_path / "tarball" / "descriptors"
    plain.mkdir(parents=True)
    (plain / "VERSION").write_text("0.1.0\n")
    assert version.descriptor_tree_hash(plain).kind == "sha256"


def test_a_record_merges_the_main_and_availability_runs_of_a_profile():
    record = records.build_record([run("main-local"), run("availability-local")])
    assert record["name"] == "local" and record["version"] == "0.2.0" and record["tree_hash"] == TREE.value
    assert record["run_ids"] == ["hvd-root-xngjnl", "hvd-root-0d27qy"]
    assert record["verdict"] == "passed" and not record["failed_checks"]
    recovery = record["properties"]["availability.recovery_s"]
    assert (recovery["verdict"], recovery["measured"], recovery["run_id"]) == ("pass", 0.56, "hvd-root-0d27qy")
    assert record["figures"]["images_per_sec[np=2,batch=16]"] == pytest.approx(72.14, abs=0.01)
    assert record["figures"]["run_time_s"] > 100 and record["node_packages"]["node1"]["horovod"] == "0.28.1"
    assert record["tools"] == {"python": "3.11.7"}


def test_a_record_refuses_mixed_or_unnamed_runs():
    with pytest.raises(RefarchError, match="differ in tree_hash"):
        records.build_record([run("main-local"), run("availability-local", version.TreeHash("2" * 40, "git-tree"))])
    with pytest.raises(RefarchError, match="name the record with --name"):
        records.build_record([run("configurability-3nodes", overrides={"nodes.count": 3})])
    old = json.loads((DATA / "main-local.json").read_text())
    with pytest.raises(RefarchError, match="names no descriptor tree hash"):
        records.build_record([old])


def test_the_gate_accepts_a_complete_passing_set_and_writes_gate_json(tmp_path):
    main = run("main-local")
    next(p for p in main["properties"] if p["id"] == "scaling.efficiency")["verdict"] = "warn"
    root = records_for(tmp_path, main=main)
    result = gate.evaluate("0.2.0", POLICY, root, tree=TREE, declared="0.2.0")
    assert result.passed, result.problems
    assert result.warnings == ["local: property scaling.efficiency = 0.4958 ratio warned (accepted by the policy; "
                               "lower 0.35; run hvd-root-xngjnl)"]
    written = json.loads(gate.write_gate(result, root).read_text())
    assert written["passed"] and written["tree_hash"] == TREE.value


def test_the_gate_names_a_missing_profile_a_failed_property_and_a_changed_tree(tmp_path):
    main = run("main-local")
    prop = next(p for p in main["properties"] if p["id"] == "convergence.ranks_diverged")
    prop.update(measured=1, verdict="fail")
    root = records_for(tmp_path, main=main)
    (root / "0.2.0" / "local-3nodes.json").unlink()
    result = gate.evaluate("0.2.0", POLICY, root, tree=version.TreeHash("3" * 40, "git-tree"), declared="0.2.0")
    assert not result.passed
    text = "\n".join(result.problems)
    assert "local-3nodes: no validation record" in text
    assert "local: property convergence.ranks_diverged = 1 ranks is fail (upper 0" in text
    assert f"local: record made for descriptor tree {TREE.value}" in text and "3333" in text
    assert not (root / "0.2.0" / "gate.json").exists()


def test_the_gate_refuses_a_version_the_descriptors_do_not_declare(tmp_path):
    result = gate.evaluate("0.2.0", POLICY, records_for(tmp_path), tree=TREE, declared="0.1.0")
    assert result.problems == ["descriptors/VERSION says 0.1.0, not 0.2.0: bump it (and the CHANGELOG) before "
                               "validating and tagging"]


def test_a_regression_against_the_previous_release_names_both_figures(tmp_path):
    records_for(tmp_path, "0.1.0")
    slower = run("main-local")
    for row in slower["smoke"]["runs"]:
        if row["world_size"] == 2:
            row["images_per_sec"] = 50.0
    root = records_for(tmp_path, "0.2.0", main=slower)
    result = gate.evaluate("0.2.0", POLICY, root, tree=TREE, declared="0.2.0")
    assert result.previous == {"local": "0.1.0", "local-3nodes": "0.1.0"}
    assert [r["figure"] for r in result.regressions] == ["images_per_sec[np=2,batch=16]"]
    assert any("images_per_sec[np=2,batch=16] regressed from 72.14 (0.1.0) to 50 (0.2.0): -30.7%, tolerance 15%"
               in p for p in result.problems)
    warn_only = POLICY.model_copy(deep=True)
    warn_only.regression.on_regression = "warn"
    assert gate.evaluate("0.2.0", warn_only, root, tree=TREE, declared="0.2.0").passed


def test_the_project_policy_names_known_properties_and_figures():
    policy = gate.load_policy()
    ids = {i for rule in policy.records.values() for i in rule.must_pass} | set(policy.may_warn)
    assert ids <= set(properties.KNOWN)
    for figure in policy.regression.tolerances:
        assert figure in properties.KNOWN or figure in ("images_per_sec", "busbw_Bps", "run_time_s"), figure


def test_a_malformed_policy_is_one_line(tmp_path):
    bad = tmp_path / "policy.yml"
    bad.write_text("records: {local: {must_pass: []}}\nregression: {on_regression: maybe}\n")
    with pytest.raises(RefarchError, match=r"policy.yml: regression.on_regression: Input should be 'fail' or 'warn'"):
        gate.load_policy(bad)


def test_cli_record_then_gate(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(version, "descriptor_tree_hash", lambda *a: TREE)
    monkeypatch.setattr(version, "architecture_version", lambda *a: "0.2.0")
    for name, data in (("main", run("main-local")), ("avail", run("availability-local"))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(data))
    out = tmp_path / "validation"
    assert cli.main(["record", str(tmp_path / "main"), str(tmp_path / "avail"), "--out", str(out)]) == 0
    assert "local.json: passed" in capsys.readouterr().out
    policy = tmp_path / "policy.yml"
    policy.write_text("records:\n  local: {must_pass: [availability.recovery_s]}\n  gpu-v100: {}\n")
    assert cli.main(["gate", "v0.2.0", "--policy", str(policy), "--records", str(out)]) == 1
    assert "REFUSED: gpu-v100: no validation record" in capsys.readouterr().out
    policy.write_text("records:\n  local: {must_pass: [availability.recovery_s]}\n")
    assert cli.main(["gate", "0.2.0", "--policy", str(policy), "--records", str(out)]) == 0
    assert "may be released" in capsys.readouterr().out and (out / "0.2.0" / "gate.json").is_file()


def test_results_carry_version_tree_hash_and_tools(tmp_path):
    from refarch.results import Results

    data = Results("hvd-unit-000000", "local", "local", overrides={"nodes.count": 3}).as_dict()
    assert data["architecture_version"] == version.architecture_version()
    assert data["tree_hash"] == version.descriptor_tree_hash().value and data["tree_hash_kind"] == "git-tree"
    assert data["overrides"] == {"nodes.count": 3} and "python" in data["tools"]
    assert copy.deepcopy(data) == data
