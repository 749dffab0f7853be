"""Architecture version, validation records and the release gate, on the
results of real runs (tests/unit/data/records/)."""

import copy
import json
import subprocess
from pathlib import Path

import pytest

from refarch import cli, properties, version
from refarch.errors import RefarchError
from refarch.judge import criteria as release_criteria
from refarch.judge import gate, records
from refarch.paths import ROOT

DATA = Path(__file__).parent / "data" / "records"
TREE = version.TreeHash("1f" * 20, "git-tree")
#: The 3-node record's references (validation/release-criteria.yml, tox.ini).
THREE_NODES = {f"properties.scaling.efficiency.reference.{k}": v
               for k, v in {"target": 0.36, "lower": 0.2, "warn_below": 0.28, "warn_above": 0.5}.items()}
CRITERIA = release_criteria.ReleaseCriteria.model_validate({
    "records": {
        "local": {"must_pass": ["scaling.efficiency", "convergence.ranks_diverged", "availability.recovery_s",
                               "exposure.outside_open_ports"]},
        "local-3nodes": {"must_pass": ["scaling.efficiency", "communication.busbw_to_tcp"],
                         "references": THREE_NODES},
    },
    "may_warn": ["scaling.efficiency"],
    "regression": {"on_regression": "fail", "tolerances": {
        "images_per_sec": {"relative": 0.15, "better": "higher"},
        "availability.recovery_s": {"relative": 1.0, "absolute": 1.0, "better": "lower"}}},
})


JUDGE = "ab" * 32
MACHINE = {"cpu_model": "AMD EPYC", "cores": 2, "memory_bytes": 25276502016, "kernel": "6.18.44"}


def run(name: str, tree: version.TreeHash = TREE, ver: str = "0.2.0", overrides=None, machine=None) -> dict:
    data = json.loads((DATA / f"{name}.json").read_text())
    # The three runs were made days apart, with different pins: the tests give them one tree.
    data.update(tree.as_dict(), architecture_version=ver, overrides=overrides or {}, tools={"python": "3.11.7"},
                pins_hash="0123456789abcdef", judge_hash=JUDGE, machine=machine or MACHINE)
    return data


def evaluate(root, criteria=CRITERIA, ver="0.2.0", tree=TREE, declared="0.2.0", judge=JUDGE):
    return gate.evaluate(ver, criteria, root, tree=tree, declared=declared, judge=judge)


def records_for(root: Path, ver: str = "0.2.0", tree=TREE, main=None, machine=None) -> Path:
    local = records.build_record([main or run("main-local", tree, ver, machine=machine),
                                  run("availability-local", tree, ver, machine=machine)])
    three = records.build_record([run("configurability-3nodes", tree, ver, {"nodes.count": 3, **THREE_NODES},
                                      machine)], "local-3nodes")
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
    next(p for p in main["properties"] if p["id"] == "scaling.efficiency").update(verdict="warn", measured=0.40)
    root = records_for(tmp_path, main=main)
    result = evaluate(root)
    assert result.passed, result.problems
    assert result.warnings == ["local: property scaling.efficiency = 0.4 ratio warned (accepted by the release criteria; "
                               "lower 0.35; run hvd-root-xngjnl)"]
    written = json.loads(gate.write_gate(result, root).read_text())
    assert written["passed"] and written["tree_hash"] == TREE.value


def test_the_gate_names_a_missing_profile_a_failed_property_and_a_changed_tree(tmp_path):
    main = run("main-local")
    prop = next(p for p in main["properties"] if p["id"] == "convergence.ranks_diverged")
    prop.update(measured=1, verdict="fail")
    root = records_for(tmp_path, main=main)
    (root / "0.2.0" / "local-3nodes.json").unlink()
    result = evaluate(root, tree=version.TreeHash("3" * 40, "git-tree"))
    assert not result.passed
    text = "\n".join(result.problems)
    assert "local-3nodes: no validation record" in text
    assert "local: property convergence.ranks_diverged = 1 ranks is fail (upper 0" in text
    assert f"local: record made for descriptor tree {TREE.value}" in text and "3333" in text
    assert not (root / "0.2.0" / "gate.json").exists()


def test_the_gate_refuses_a_version_the_descriptors_do_not_declare(tmp_path):
    result = evaluate(records_for(tmp_path), declared="0.1.0")
    assert result.problems == ["descriptors/VERSION says 0.1.0, not 0.2.0: bump it (and the CHANGELOG) before "
                               "validating and tagging"]


def test_a_regression_against_the_previous_release_names_both_figures(tmp_path):
    records_for(tmp_path, "0.1.0")
    slower = run("main-local")
    for row in slower["smoke"]["runs"]:
        if row["world_size"] == 2:
            row["images_per_sec"] = 50.0
    root = records_for(tmp_path, "0.2.0", main=slower)
    result = evaluate(root)
    assert result.previous == {"local": "0.1.0", "local-3nodes": "0.1.0"}
    assert [r["figure"] for r in result.regressions] == ["images_per_sec[np=2,batch=16]"]
    assert any("images_per_sec[np=2,batch=16] regressed from 72.14 (0.1.0) to 50 (0.2.0): -30.7%, tolerance 15%"
               in p for p in result.problems)
    warn_only = CRITERIA.model_copy(deep=True)
    warn_only.regression.on_regression = "warn"
    assert evaluate(root, warn_only).passed


def test_the_release_criteria_name_known_properties_and_figures():
    criteria = release_criteria.load_criteria()
    ids = {i for rule in criteria.records.values() for i in rule.must_pass} | set(criteria.may_warn)
    assert ids <= set(properties.KNOWN)
    regression = criteria.regression
    for figure in [*regression.tolerances, *regression.not_compared, *regression.accept_inconclusive]:
        assert figure in properties.KNOWN or figure in records.FIGURE_NAMES, figure


def test_malformed_release_criteria_is_one_line(tmp_path):
    bad = tmp_path / "release-criteria.yml"
    bad.write_text("records: {local: {must_pass: []}}\nregression: {on_regression: maybe}\n")
    with pytest.raises(RefarchError, match=r"release-criteria.yml: regression.on_regression: Input should be 'fail' or 'warn'"):
        release_criteria.load_criteria(bad)


def test_cli_record_then_gate(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(version, "descriptor_tree_hash", lambda *a: TREE)
    monkeypatch.setattr(version, "architecture_version", lambda *a: "0.2.0")
    for name, data in (("main", run("main-local")), ("avail", run("availability-local"))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(data))
    out = tmp_path / "validation"
    assert cli.main(["record", str(tmp_path / "main"), str(tmp_path / "avail"), "--out", str(out)]) == 0
    assert "local.json: passed" in capsys.readouterr().out
    criteria = tmp_path / "release-criteria.yml"
    committed = (ROOT / "validation" / "release-criteria.yml").read_text()
    regression = committed[committed.index("\nregression:"):]
    criteria.write_text("records:\n  local: {must_pass: [availability.recovery_s]}\n  gpu-v100: {}\n" + regression)
    assert cli.main(["gate", "v0.2.0", "--criteria", str(criteria), "--records", str(out)]) == 1
    assert "REFUSED: gpu-v100: no validation record" in capsys.readouterr().out
    criteria.write_text("records:\n  local: {must_pass: [availability.recovery_s]}\n" + regression)
    # Without the CI environments' passes on this tree (refarch ci record) the gate refuses, naming them.
    assert cli.main(["gate", "0.2.0", "--criteria", str(criteria), "--records", str(out)]) == 1
    assert "the CI environments of this tree are not recorded" in capsys.readouterr().out
    from refarch.ci import release as ci_release

    monkeypatch.setattr(ci_release, "problems", lambda *a, **k: [])
    assert cli.main(["gate", "0.2.0", "--criteria", str(criteria), "--records", str(out)]) == 0
    assert "may be released" in capsys.readouterr().out and (out / "0.2.0" / "gate.json").is_file()


def test_results_carry_version_tree_hash_and_tools(tmp_path):
    from refarch.judge.results import Results

    data = Results("hvd-unit-000000", "local", "local", overrides={"nodes.count": 3}).as_dict()
    assert data["architecture_version"] == version.architecture_version()
    assert data["tree_hash"] == version.descriptor_tree_hash().value and data["tree_hash_kind"] == "git-tree"
    assert data["overrides"] == {"nodes.count": 3} and "python" in data["tools"]
    assert copy.deepcopy(data) == data


# Records bind the judge ----------------------------------------------------------------------
def test_a_record_made_with_an_overridden_reference_is_refused_naming_the_override(tmp_path):
    lenient = {"properties.scaling.efficiency.reference.lower": 0}
    local = records.build_record([run("main-local", overrides=lenient), run("availability-local", overrides=lenient)],
                                 "local")
    root = records_for(tmp_path)
    records.write_record(local, root)
    result = evaluate(root)
    assert not result.passed
    assert any("local: record " in p and "made with an overridden reference (properties.scaling.efficiency."
               "reference.lower=0) the release criteria do not declare for it: it cannot stand as profile local" in p
               for p in result.problems)


def test_every_figure_is_judged_again_against_the_profile_in_this_tree(tmp_path):
    """A record that says pass for a figure this tree's profile fails
    (e.g. a reference tightened after the record was made)."""
    main = run("main-local")
    prop = next(p for p in main["properties"] if p["id"] == "scaling.efficiency")
    prop.update(measured=0.30, verdict="pass")  # below the local profile's lower bound 0.35
    result = evaluate(records_for(tmp_path, main=main))
    assert not result.passed
    assert any(p.startswith("local: property scaling.efficiency = 0.3 ratio is fail (lower 0.35") and
               "judged again against profile local in this tree; recorded as pass" in p for p in result.problems)


def test_a_record_made_by_another_judge_is_reported(tmp_path):
    root = records_for(tmp_path)
    result = evaluate(root, judge="cd" * 32)
    assert result.passed
    assert any(w.startswith(f"local: record made by another judge (judge {JUDGE[:12]}, suite commit ") and
               "this tree judges with cdcdcdcdcdcd" in w for w in result.warnings)
    strict = CRITERIA.model_copy(deep=True)
    strict.on_other_judge = "fail"
    assert not evaluate(root, strict, judge="cd" * 32).passed
    assert evaluate(root).warnings == []


def test_the_judge_hash_follows_the_suite_and_the_profiles(tmp_path):
    repo = tmp_path / "repo"
    for rel in ("refarch/a.py", "tests/t.py", "descriptors/profiles/local.yml", "validation/release-criteria.yml",
                "descriptors/VERSION"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(rel)
    first = version.judge_hash(repo)
    (repo / "descriptors" / "VERSION").write_text("0.3.0")  # the descriptors are not the judge
    assert version.judge_hash(repo) == first
    (repo / "descriptors" / "profiles" / "local.yml").write_text("changed")
    assert version.judge_hash(repo) != first


# Another machine: compared side by side only ---------------------------------------------
OTHER = {**MACHINE, "cpu_model": "Intel Xeon", "kernel": "6.1.0"}


def _slower_on_another_machine(tmp_path) -> Path:
    """The issue's case: the same descriptors measured on another machine:
    np=1 37.0 and np=2 40.0 images/sec against the record's 67.8 / 72.1."""
    records_for(tmp_path, "0.1.0")
    slower = run("main-local", machine=OTHER)
    for row in slower["smoke"]["runs"]:
        row["images_per_sec"] = {1: 37.0, 2: 40.0}[row["world_size"]]
    return records_for(tmp_path, "0.2.0", main=slower, machine=OTHER)


def compare_json(root: Path, figures: list[dict], tree=TREE, baseline="0.1.0") -> None:
    (root / "0.2.0" / "compare.json").write_text(json.dumps({
        "baseline_version": baseline, "candidate_tree_hash": tree.value, "candidate_tree_hash_kind": tree.kind,
        "figures": figures}))


SAME = [{"figure": "images_per_sec[np=2,batch=16]", "ratio": 1.01, "ci95": [0.97, 1.04],
         "verdict": "no change detected"}]


def test_figures_of_another_machine_are_not_regressions_but_a_release_needs_a_comparison(tmp_path):
    root = _slower_on_another_machine(tmp_path)
    result = evaluate(root)
    assert not result.passed and result.regressions == []
    assert any("local: figures of 0.1.0 (AMD EPYC, 2 cores, 24 GiB, kernel 6.18.44) and 0.2.0 (Intel Xeon, 2 "
               "cores, 24 GiB, kernel 6.1.0) come from different machines" in p and
               "no side-by-side comparison with 0.1.0" in p for p in result.problems), result.problems
    preview = gate.evaluate("0.2.0", CRITERIA, root, tree=TREE, declared="0.2.0", judge=JUDGE, release=False)
    assert preview.passed and any("no side-by-side comparison" in w for w in preview.warnings)
    compare_json(root, SAME)
    assert evaluate(root).passed


def test_a_comparison_of_another_tree_fails_the_release(tmp_path):
    root = _slower_on_another_machine(tmp_path)
    compare_json(root, SAME, tree=version.TreeHash("2e" * 20, "git-tree"))
    result = evaluate(root)
    assert not result.passed
    assert any(f"the side-by-side comparison measured descriptor tree {'2e' * 20} as its candidate, the release "
               f"ships {TREE.value}" in p for p in result.problems), result.problems


def test_a_side_by_side_regression_fails_the_gate(tmp_path):
    root = _slower_on_another_machine(tmp_path)
    compare_json(root, [
        {"figure": "images_per_sec[np=2,batch=16]", "ratio": 0.86, "ci95": [0.82, 0.89], "verdict": "regression"},
        {"figure": "images_per_sec[np=1,batch=16]", "ratio": 1.01, "ci95": [0.97, 1.04],
         "verdict": "no change detected"}])
    result = evaluate(root)
    assert not result.passed and "compare" not in records.load_records("0.2.0", root)
    assert "local: images_per_sec[np=2,batch=16] candidate/baseline 0.860 (95 % interval 0.820-0.890) against " \
           "0.1.0, side by side: regression" in result.problems


def test_an_inconclusive_figure_fails_a_release_unless_accepted_by_name(tmp_path):
    root = _slower_on_another_machine(tmp_path)
    compare_json(root, [*SAME, {"figure": "busbw_Bps", "ratio": 0.97, "ci95": [0.80, 1.15],
                                "verdict": "inconclusive"}])
    result = evaluate(root)
    assert not result.passed and any("busbw_Bps" in p and "inconclusive: not accepted by the release criteria"
                                     in p for p in result.problems), result.problems
    accepting = CRITERIA.model_copy(deep=True)
    accepting.regression.accept_inconclusive = ["busbw_Bps"]
    result = evaluate(root, accepting)
    assert result.passed and any("busbw_Bps" in w and "(accepted by the release criteria)" in w
                                 for w in result.warnings)


def test_a_figure_missing_side_by_side_fails_the_release(tmp_path):
    root = _slower_on_another_machine(tmp_path)
    compare_json(root, [*SAME, {"figure": "busbw_Bps", "verdict": "missing", "missing_from": ["candidate 2"],
                                "message": "busbw_Bps: missing from repetition(s) candidate 2: not compared"}])
    result = evaluate(root)
    assert "local: side by side against 0.1.0: busbw_Bps: missing from repetition(s) candidate 2: not compared" \
        in result.problems


def test_a_figure_the_previous_release_had_and_this_one_lacks_fails(tmp_path):
    records_for(tmp_path, "0.1.0")
    main = run("main-local")
    main["smoke"]["runs"] = [r for r in main["smoke"]["runs"] if r["world_size"] != 2]
    root = records_for(tmp_path, "0.2.0", main=main)
    result = evaluate(root)
    assert "local: figure images_per_sec[np=2,batch=16] was measured in 0.1.0 and is missing from this record: " \
           "not compared (a measurement that stopped)" in result.problems


def test_release_criteria_must_compare_every_figure_or_say_why_not(tmp_path):
    text = (ROOT / "validation" / "release-criteria.yml").read_text()
    bad = tmp_path / "release-criteria.yml"
    bad.write_text(text.replace("    convergence.test_accuracy: {relative: 0.05, better: higher}\n", ""))
    with pytest.raises(RefarchError, match=r"release-criteria.yml: regression: figure convergence.test_accuracy "
                                           r"has neither a tolerance nor a not_compared reason"):
        release_criteria.load_criteria(bad)
    bad.write_text(text.replace("  not_compared:\n", "  not_compared:\n    busbw_Bps: a reason\n"))
    with pytest.raises(RefarchError, match=r"figure busbw_Bps has both a tolerance and a not_compared reason"):
        release_criteria.load_criteria(bad)


def test_run_time_leaves_out_the_builds():
    data = run("main-local")
    data["phases_s"] = {"image": 200.0, "wheel": 150.0, "deploy": 3.0, "configure": 60.0, "smoke": 60.0}
    assert records.figures(data)["run_time_s"] == 123.0


def test_the_release_criteria_declare_the_references_tox_sets_for_the_3_node_record():
    import configparser
    import shlex

    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    words = shlex.split(tox["testenv:configurability"]["commands"].replace("\n", " "))
    sets = dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--set")
    declared = release_criteria.load_criteria().records["local-3nodes"].references
    assert {k: float(v) for k, v in sets.items() if k.startswith("properties.")} == declared


def test_the_same_descriptors_measured_on_another_machine_pass_against_the_committed_record(tmp_path):
    """The issue's fresh-machine case against the committed 0.1.0 record
    (validation/0.1.0: np=1 67.8 and np=2 63.0 images/sec, busbw 0.82 GB/s,
    run time 398 s, no machine description): the next release measured on
    another machine of the kind, np=1 37.0 and np=2 40.0 images/sec, busbw
    0.55 GB/s and 668 s with its cold image and wheel builds.  Under the
    committed release criteria nothing is a regression: the figures come from two
    machines, and run time leaves out the builds."""
    import shutil

    shutil.copytree(ROOT / "validation" / "0.1.0", tmp_path / "0.1.0")
    committed = records.load_records("0.1.0", tmp_path)["local"]["figures"]
    assert round(committed["images_per_sec[np=2,batch=16]"], 1) == 63.0 and committed["run_time_s"] == 397.9
    main = run("main-local", machine=OTHER)
    for row in main["smoke"]["runs"]:
        row["images_per_sec"] = {1: 37.0, 2: 40.0}[row["world_size"]]
    main["communication"] = {"pairs": [{"ranks": ["node1", "node2"], "sizes": [
        {"bytes": 16 << 20, "busbw_Bps": 0.50e9}, {"bytes": 64 << 20, "busbw_Bps": 0.55e9}]}]}
    main["properties"].append({"id": "communication.busbw_to_tcp", "unit": "ratio", "measured": 0.35,
                               "reference": {"target": 0.33, "lower": 0.15, "warn_below": 0.17},
                               "verdict": "pass", "evidence": {}})
    main["phases_s"] = {"image": 119.0, "wheel": 237.0, "deploy": 3.1, "configure": 100.0, "check": 11.0,
                        "idempotence": 23.0, "smoke": 51.0, "properties": 56.0, "teardown": 67.9}
    assert sum(main["phases_s"].values()) == pytest.approx(668.0)
    records_for(tmp_path, "0.2.0", main=main, machine=OTHER)
    figures = records.load_records("0.2.0", tmp_path)["local"]["figures"]
    # The record's run time is the main run's (312 s without the builds) and the availability run's.
    availability = records.figures(run("availability-local"))["run_time_s"]
    assert figures["busbw_Bps"] == 0.55e9 and figures["run_time_s"] == pytest.approx(312.0 + availability)
    result = gate.evaluate("0.2.0", release_criteria.load_criteria(), tmp_path, tree=TREE, declared="0.2.0", judge=JUDGE,
                           release=False)
    assert result.passed and result.regressions == [], result.problems
    assert any("come from different machines" in w and "no side-by-side comparison with 0.1.0" in w
               for w in result.warnings), result.warnings
    # A release of it needs the side-by-side comparison of its own tree.
    assert not evaluate(tmp_path, release_criteria.load_criteria()).passed
    compare_json(tmp_path, SAME)
    assert evaluate(tmp_path, release_criteria.load_criteria()).passed
