"""The timings: the main job's benchmark file (refarch.report.timings), and the history that collects every
benchmark file and its page, docs/reference/timings.md (refarch.docs.timings)."""

import json
import os

import pytest

from refarch.docs import timings as history_mod
from refarch.report import timings


def _run(tmp_path, name, phases, mtime):
    rundir = tmp_path / name
    rundir.mkdir()
    (rundir / "run.json").write_text("{}")
    (rundir / "results.json").write_text(json.dumps({"phases_s": phases}))
    os.utime(rundir / "run.json", (mtime, mtime))
    return rundir


def test_entry_of_a_warm_and_a_cold_run(tmp_path):
    warm = _run(tmp_path, "hvd-root-aaaaaa", {"image": 0.0, "wheel": 0.0, "configure": 55.4}, 1000)
    item = timings.entry(990.0, 995.5, 1229.0, 0, warm)
    assert item["total_s"] == 239.0 and item["bootstrap_s"] == 5.5
    assert item["cold"] is False and item["run_id"] == "hvd-root-aaaaaa" and item["phases_s"]["configure"] == 55.4
    cold = _run(tmp_path, "hvd-root-bbbbbb", {"image": 119.0, "wheel": 237.0}, 2000)
    assert timings.entry(1990.0, 2000.0, 2600.0, 1, cold)["cold"] is True


def test_run_made_since_takes_the_newest_run_of_this_job(tmp_path):
    _run(tmp_path, "old", {}, 100)
    _run(tmp_path, "mine", {}, 300)
    assert timings.run_made_since(tmp_path, 200).name == "mine"
    assert timings.run_made_since(tmp_path, 400) is None
    # A job refused before it made a run is still recorded, without one.
    assert timings.entry(400.0, 401.0, 402.0, 2, None)["run_id"] is None


def test_append_keeps_the_newest_entries(tmp_path):
    path = tmp_path / "main-job-timings.json"
    for i in range(5):
        timings.append(path, {"total_s": i}, keep=3)
    assert [e["total_s"] for e in json.loads(path.read_text())["entries"]] == [2, 3, 4]
    path.write_text("not json")
    assert timings.append(path, {"total_s": 9}) == [{"total_s": 9}]


# -- the timings history and its page (refarch.docs.timings) ------------------------------------------------------
FIX = "python -m refarch.docs.timings write"


def _benchmarks(tmp_path):
    """One recorded example of each kind of benchmark file, shaped as the suite writes them."""
    runs, cache = tmp_path / "runs", tmp_path / "cache"
    (runs / "hvd-root-aaaaaa").mkdir(parents=True)
    (runs / "hvd-root-aaaaaa" / "results.json").write_text(json.dumps({"commit": "a" * 40}))
    (runs / "main-job-timings.json").write_text(json.dumps({"what": "...", "entries": [
        {"finished": "2026-12-06T10:00:00Z", "host": "vm", "cpus": 2, "total_s": 239.0, "bootstrap_s": 5.5,
         "exit": 0, "run_id": "hvd-root-aaaaaa", "cold": False, "phases_s": {"configure": 55.4, "smoke": 60.1}}]}))
    (runs / "ci-timings.json").write_text(json.dumps({
        "run": "ci-20261206-104314", "finished": "2026-12-06T11:00:00Z", "host": "vm", "cpus": 2, "commit": "b" * 40,
        "total_s": 3000.0, "cpu_busy_s": 5000.0, "cpu_floor_s": 2500.0, "budget_s": 3300.0,
        "environments": [{"name": "fresh", "tier": "change", "action": "ran", "seconds": 516.2, "exit": 0,
                          "cpu_busy": 0.9},
                         {"name": "scale", "tier": "heavy", "action": "reused", "why": "reused from ..."}]}))
    (cache / "ci").mkdir(parents=True)
    record = {"environment": "fresh", "key": "k", "machine": "vm/3d1219c7c4c5404aaa1f6d2a48adfda4", "verdict": "passed",
              "seconds": 516.2, "run": "ci-20261206-104314", "commit": "b" * 40, "finished": 1796554310.2}
    (cache / "ci" / "fresh.json").write_text(json.dumps({"environment": "fresh", "records": [
        record, {**record, "seconds": 419.6, "run": "ci-20261206-162552", "finished": 1796574772.6},
        {"environment": "fresh", "verdict": "passed"}]}))  # an older record's shape: skipped
    (cache / "ci" / "report.json").write_text(json.dumps({"environment": "report", "records": [
        {**record, "environment": "report", "seconds": 7.3, "finished": 1796555205.2}]}))
    bench = tmp_path / "scale-bench.json"
    bench.write_text(json.dumps({"machine": {"host": "vm", "cpus": 2}, "tree": "c" * 40, "date": "2026-12-06T05:08:33Z",
                                 "profile": "scale", "runs": [
                                     {"nodes": n, "exit": 0, "seconds": s, "phases_s": {"deploy": 3.1, "configure": 55.4},
                                      "checks": {"passed": 55, "skipped": 20}} for n, s in ((2, 235.2), (4, 509.7))]}))
    return runs, cache, bench


def test_collect_reads_each_kind_of_benchmark_file_and_is_idempotent(tmp_path):
    runs, cache, bench = _benchmarks(tmp_path)
    path = tmp_path / "timings.json"
    # ci-timings.json and the records name one run: one entry, the records adding report's seconds to it.
    assert history_mod.collect(runs, path, cache, bench) == (5, 1, 5)
    entries = {e.ident: e for e in history_mod.load(path)}
    job = entries["main-job", "vm 2026-12-06T10:00:00Z"]
    assert job.tree == "a" * 40 and job.figures == {"total_s": 239.0, "bootstrap_s": 5.5, "exit": 0.0, "cold": 0.0,
                                                    "configure_s": 55.4, "smoke_s": 60.1}
    run = entries["ci", "ci-20261206-104314"]
    assert run.machine == "vm" and run.tree == "b" * 40 and run.figures["fresh_s"] == 516.2
    assert run.figures["report_s"] == 7.3 and run.figures["cpu_floor_s"] == 2500.0 and "scale_s" not in run.figures
    later = entries["ci", "ci-20261206-162552"]
    assert later.figures == {"fresh_s": 419.6} and later.date == "2026-12-06T16:32:52Z"
    assert later.machine == "vm/3d1219c7c4c5404aaa1f6d2a48adfda4" and later.source.endswith("ci")
    bench2 = entries["scale-bench", "2026-12-06T05:08:33Z n=2"]
    assert bench2.figures["nodes"] == 2 and bench2.figures["total_s"] == 235.2 and bench2.figures["configure_s"] == 55.4
    text = path.read_text()
    assert history_mod.collect(runs, path, cache, bench) == (0, 0, 5)
    assert path.read_text() == text


def test_collect_keeps_what_the_history_had_and_leaves_absent_files_alone(tmp_path):
    runs, cache, bench = _benchmarks(tmp_path)
    path = tmp_path / "timings.json"
    old = history_mod.Entry(kind="ci", machine="machine 6", tree=None, date="2026-12-04", source="README.md prose, x",
                            key="README x", figures={"total_s": 4518.0})
    history_mod.save([old], path)
    assert history_mod.collect(tmp_path / "nothing", path, tmp_path / "nothing", tmp_path / "none.json") == (0, 0, 1)
    assert history_mod.collect(runs, path, cache, bench)[0] == 5
    assert history_mod.load(path)[0] == old


def test_bad_input_is_one_line_naming_the_file_exit_2(tmp_path, capsys):
    runs, cache, bench = _benchmarks(tmp_path)
    (runs / "ci-timings.json").write_text("not json")
    with pytest.raises(ValueError, match="ci-timings.json: not readable JSON"):
        history_mod.collect(runs, tmp_path / "timings.json", cache, bench)
    assert history_mod.main(["collect", "--runs", str(runs), "--cache", str(cache),
                             "--history", str(tmp_path / "timings.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ci-timings.json" in err
    (tmp_path / "bad.json").write_text(json.dumps([{"kind": "ci", "date": "yesterday"}]))
    assert history_mod.main(["write", "--history", str(tmp_path / "bad.json")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    with pytest.raises(SystemExit) as stop:
        history_mod.main(["publish"])
    assert stop.value.code == 2 and capsys.readouterr().err.count("\n") == 1


def test_an_entry_needs_an_iso_date_and_finite_figures():
    good = {"kind": "ci", "machine": "vm", "tree": None, "date": "2026-12-06T10:43:14Z", "source": "s", "key": "k",
            "figures": {"total_s": 1.0}}
    assert history_mod.Entry(**good).date == "2026-12-06T10:43:14Z"
    for bad in ({"date": "6 Dec 2026"}, {"figures": {"total_s": float("nan")}}, {"kind": ""}, {"extra": 1}):
        with pytest.raises(ValueError):
            history_mod.Entry(**{**good, **bad})


def test_the_page_and_plots_are_deterministic(tmp_path):
    runs, cache, bench = _benchmarks(tmp_path)
    history_mod.collect(runs, tmp_path / "timings.json", cache, bench)
    entries = history_mod.load(tmp_path / "timings.json")
    text = history_mod.page(entries)
    assert text == history_mod.page(list(reversed(entries))) and text.endswith("\n")
    assert "## main-job" in text and "## ci" in text and "](img/timings-ci.svg)" in text
    assert "| vm/3d1219c7 | 2026-12-06 | bbbbbbb |" in text
    first, second = history_mod.plots(entries, tmp_path / "a"), history_mod.plots(entries, tmp_path / "b")
    assert [p.name for p in first] == ["timings-main-job.svg", "timings-ci.svg", "timings-scale-bench.svg"]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(first, second, strict=True))
    assert b"<dc:date>" not in first[0].read_bytes()


def test_the_committed_page_is_the_history_rendered():
    history = history_mod.load(history_mod.HISTORY)
    assert {e.kind for e in history} >= {"main-job", "ci", "scale-bench"}
    rel = history_mod.PAGE.relative_to(history_mod.ROOT)
    assert history_mod.PAGE.is_file(), f"{rel} is missing: run `{FIX}`"
    assert history_mod.PAGE.read_text(encoding="utf-8") == history_mod.page(history), \
        f"{rel} differs from validation/timings.json: run `{FIX}`"
    for name in history_mod.charts(history).values():
        assert (history_mod.IMG / name).is_file(), f"{rel}'s plot img/{name} is missing: run `{FIX}`"
