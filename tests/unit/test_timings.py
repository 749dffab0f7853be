"""The main job's benchmark file (refarch.report.timings)."""

import json
import os

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
