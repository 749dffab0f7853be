"""The HTML report offline, from a recorded 3-node run's results.json:
verdict, node x check matrix, properties and the plot in the page, and the
trend across runs."""

import json
import shutil
from pathlib import Path

from refarch.judge.results import verdict
from refarch.report import html as report

RECORDED = Path(__file__).parent / "data" / "report" / "results.json"


def test_verdict_counts_failed_checks_and_properties():
    data = json.loads(RECORDED.read_text())
    assert verdict(data) == "FAILED"  # the recorded run had 3 failed checks
    ok = {**data, "check_counts": {"passed": 3}, "properties": [{"verdict": "pass"}, {"verdict": "warn"}]}
    assert verdict(ok) == "PASSED"
    assert verdict({**ok, "properties": [{"verdict": "fail"}]}) == "FAILED"
    assert verdict({**ok, "interrupted": {"signal": "SIGTERM", "phase": "smoke"}}) == "INTERRUPTED"


def test_refarch_list_and_the_trend_give_a_run_the_same_verdict(tmp_path, monkeypatch):
    """One rule for a run's verdict: a run whose checks all passed but
    whose property failed is FAILED in `refarch list` and in the trend (the
    list once counted checks only)."""
    from refarch import cli
    from refarch.run import RunDir

    monkeypatch.setenv("REFARCH_RUNS_DIR", str(tmp_path))
    monkeypatch.setattr(cli.runs.localcloud, "all_run_ids", lambda: set())
    rundir = RunDir.at(tmp_path / "hvd-ci-abc123")
    rundir.path.mkdir()
    rundir.write_meta({"profile": "local", "started_at": 1.0e9, "destroyed": True})
    data = {**json.loads(RECORDED.read_text()), "check_counts": {"passed": 40},
            "properties": [{"id": "scaling.efficiency", "verdict": "fail", "measured": 0.3}]}
    rundir.results_file.write_text(json.dumps(data))
    assert [r["outcome"] for r in cli.runs.run_rows()] == ["FAILED 1"]
    assert "FAILED" in report.render_trend(tmp_path).read_text()


def test_the_matrix_has_a_column_per_node_and_the_cluster():
    columns, rows = report.check_matrix(json.loads(RECORDED.read_text()))
    assert columns == ["node1", "node2", "node3", "cluster"]
    sshd = next(r for r in rows if r["check"] == "test_sshd_effective_settings")
    assert sshd["cells"] == {"node1": "passed", "node2": "passed", "node3": "passed"}
    assert next(r for r in rows if r["check"] == "test_node_count")["cells"] == {"cluster": "passed"}
    assert not any(r["check"].startswith("test_property") for r in rows)


def test_the_page_has_every_property_and_the_plot(tmp_path):
    results = tmp_path / "results.json"
    shutil.copy(RECORDED, results)
    html = report.render(results).read_text()
    for prop in json.loads(RECORDED.read_text())["properties"]:
        assert f"<td>{prop['id']}</td>" in html
    assert 'id="scaling-plot"' in html and "ideal (linear), batch 16" in html


def test_the_trend_lists_runs_oldest_first(tmp_path):
    for run_id, finished, ips in (("b", "2026-11-30T02:00:00Z", 70.0), ("a", "2026-11-30T01:00:00Z", 60.0)):
        (tmp_path / run_id).mkdir()
        data = json.loads(RECORDED.read_text())
        data.update(run_id=run_id, finished_at=finished, smoke={"runs": [{"world_size": 1, "images_per_sec": ips}]})
        (tmp_path / run_id / "results.json").write_text(json.dumps(data))
    html = report.render_trend(tmp_path).read_text()
    assert html.index(">a</a>") < html.index(">b</a>") and "60.0" in html and "70.0" in html


def test_the_trend_shows_the_validation_records_per_version(tmp_path):
    from refarch.judge import records

    runs, root = tmp_path / "runs", tmp_path / "validation"
    runs.mkdir()
    for ver, ips in (("0.10.0", 61.5), ("0.9.0", 73.25)):
        data = json.loads((Path(__file__).parent / "data" / "records" / "main-local.json").read_text())
        data.update(architecture_version=ver, tree_hash="c0ffee" * 6, overrides={})
        data["smoke"]["runs"][1]["images_per_sec"] = ips
        records.write_record(records.build_record([data]), root)
    (root / "0.9.0" / "gate.json").write_text("{}")
    html = report.render_trend(runs, records=root).read_text()
    table = html[html.index('id="records"'):]
    assert table.index("<td>0.9.0</td>") < table.index("<td>0.10.0</td>")  # semantic order, not text order
    assert "73.2" in table and "61.5" in table and "49.6%" in table and "c0ffeec0ffee" in table
    assert "No validation records yet" in report.render_trend(runs, records=tmp_path / "none").read_text()


def test_the_trend_shows_every_side_by_side_comparison(tmp_path):
    """The release's compare.json (the gate's) and a comparison under runs/,
    each with its verdict table and both sides' distributions (recorded
    comparisons: an A/A run and the seeded slowdown)."""
    import shutil

    data = Path(__file__).parent / "data" / "compare"
    runs, root = tmp_path / "runs", tmp_path / "validation"
    (runs / "compare-20261201-100000").mkdir(parents=True)
    (root / "0.2.0").mkdir(parents=True)
    shutil.copy(data / "seeded-fusion-off-n3.json", root / "0.2.0" / "compare.json")
    shutil.copy(data / "aa-head-head-n3.json", runs / "compare-20261201-100000" / "compare.json")
    (runs / "compare-20261201-110000").mkdir()
    (runs / "compare-20261201-110000" / "compare.json").write_text("{interrupted")  # left out
    html = report.render_trend(runs, records=root).read_text()
    seeded, aa = html.index('id="comparison-1"'), html.index('id="comparison-2"')
    assert seeded < aa and 'id="comparison-3"' not in html
    assert "validation/0.2.0/compare.json" in html and "runs/compare-20261201-100000/compare.json" in html
    assert html[seeded:aa].count('class="regression"') == 2  # np=2 images/sec and efficiency
    assert '<svg id="comparison-plot-1"' in html and '<svg id="comparison-plot-2"' in html
    (tmp_path / "empty").mkdir()
    quiet = report.render_trend(tmp_path / "empty", records=tmp_path / "empty").read_text()
    assert "No side-by-side comparison yet" in quiet


def test_the_page_has_a_timeline_per_failure_mode(tmp_path):
    """A partition run recorded on the local cloud (node2 cut off while
    listed): its events, seconds after the failure, and the driver's
    decisions are in the availability table."""
    run = json.loads((Path(__file__).parent / "data" / "availability" / "partition-run.json").read_text())
    results = tmp_path / "results.json"
    results.write_text(json.dumps({**json.loads(RECORDED.read_text()), "availability": {"elastic_partition": run}}))
    html = report.render(results).read_text()
    table = html[html.index('<table id="availability">'):]
    table = table[:table.index("</table>")]
    assert "<td>partition</td><td>node2</td>" in table
    assert "first step at world size 1 <b>30.9</b>" in table and "first step at world size 2 <b>66.0</b>" in table
    assert "Process 0 exit with status code 255." in table


def test_the_page_says_which_fault_cases_prove_each_check_and_property(tmp_path):
    """The fault-coverage matrix (refarch.faults.coverage) beside the run's
    checks and properties."""
    results = tmp_path / "results.json"
    shutil.copy(RECORDED, results)
    _, rows = report.check_matrix(json.loads(RECORDED.read_text()))
    assert next(r for r in rows if r["check"] == "test_sshd_effective_settings")["proven_by"] == ["F6"]
    html = report.render(results).read_text()
    assert "proven by (fault cases)" in html and "<td class=\"small\">F6</td>" in html


def test_the_plot_draws_the_profiles_reference_curve_with_its_source(tmp_path):
    data = json.loads(RECORDED.read_text())
    data["smoke"].setdefault("config", {})["reference_curve"] = {
        "images_per_sec": {"1": 412, "8": 3170}, "source": "DGX-1 (8x V100 16 GB), FP32 + XLA"}
    (tmp_path / "results.json").write_text(json.dumps(data))
    html = report.render(tmp_path / "results.json").read_text()
    assert 'id="reference-curve"' in html and "reference (right axis): DGX-1 (8x V100 16 GB)" in html
    assert "reference images/sec" in html
