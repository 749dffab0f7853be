"""Side-by-side comparison (refarch.judge.comparison, refarch.cli.compare) offline:
the statistics on figures measured on this machine, bad input refused
before anything is deployed, the repetitions interleaved, and both
clusters torn down on failure with no verdict written."""

import subprocess
from pathlib import Path

import pytest

from refarch import version
from refarch.cli import compare
from refarch.errors import RefarchError
from refarch.judge import comparison
from refarch.judge import criteria as release_criteria

#: images/sec at np=2 (median of the steps) of seven runs of the same tree
#: on one kept cluster, 2026-12-01 (ci/refarch test ... -k scaling).
NP2 = [43.6, 45.9, 42.9, 43.0, 42.1, 42.2, 42.2]
#: np=1 (the np=1 job) of the same runs.
NP1 = [38.4, 35.4, 40.1, 39.5, 37.9, 32.4, 36.5]


def test_the_same_tree_twice_is_no_change_or_inconclusive_never_a_regression():
    """A/A: the same runs split in two halves, side-by-side tolerance 5 %."""
    fig = comparison.compare_figure("images_per_sec[np=2,batch=16]", NP2[::2], NP2[1::2], 0.05, "higher")
    assert fig["verdict"] == "no change detected", fig["message"]
    assert fig["ci95"][0] <= fig["ratio"] <= fig["ci95"][1]
    noisy = comparison.compare_figure("images_per_sec[np=1,batch=16]", NP1[::2], NP1[1::2], 0.05, "higher")
    assert noisy["verdict"] == "inconclusive", noisy["message"]  # 32.4-40.1: a 5 % change cannot be excluded


def test_a_real_slowdown_is_a_regression_with_both_medians_and_the_interval():
    """10 % slower (the seeded slowdown's size) against 7 repetitions each."""
    slower = [round(v * 0.90, 2) for v in NP2]
    fig = comparison.compare_figure("images_per_sec[np=2,batch=16]", NP2, slower, 0.05, "higher")
    assert fig["verdict"] == "regression", fig["message"]
    assert fig["message"].startswith("images_per_sec[np=2,batch=16]: regression (candidate 38.61 against baseline "
                                     "42.9, median of 7 and 7; candidate/baseline 0.900, 95 % interval 0.871-0.930")
    assert fig["ci95"][1] < 0.95


def test_a_spread_too_wide_is_inconclusive_never_a_pass():
    fig = comparison.compare_figure("images_per_sec", [40.0, 41.0, 39.0], [40.0, 25.0, 44.0], 0.15, "higher")
    assert fig["verdict"] == "inconclusive" and "need more repetitions" in fig["message"]


def test_lower_is_better_mirrors_the_verdict():
    assert comparison.verdict(1.3, 1.5, 0.15, "lower") == "regression"  # the candidate takes 30-50 % longer
    assert comparison.verdict(0.6, 0.8, 0.15, "lower") == "improvement"
    assert comparison.verdict(0.95, 1.05, 0.15, "lower") == "no change detected"


#: availability.recovery_s and rejoin_s (seconds, stop mode) of one tree on
#: this machine, 2026-12-01 (runs/*/logs/availability-stop-*.json).
RECOVERY = [0.66, 0.9, 1.14, 1.92, 1.98, 2.22]
REJOIN = [34.16, 29.53, 31.17, 33.1]


def test_recovery_of_one_tree_twice_is_never_a_regression_and_twice_as_long_is():
    tol = release_criteria.load_criteria().regression.side_by_side
    rec, rej = tol["availability.recovery_s"], tol["availability.rejoin_s"]
    same = comparison.compare_figure("availability.recovery_s", RECOVERY[::2], RECOVERY[1::2], rec.relative,
                                     rec.better, absolute=rec.absolute)
    assert same["verdict"] in ("no change detected", "inconclusive"), same["message"]
    slower = comparison.compare_figure("availability.rejoin_s", REJOIN[:3], [v * 1.6 for v in REJOIN[1:]],
                                       rej.relative, rej.better, absolute=rej.absolute)
    assert slower["verdict"] == "regression" and "tolerance 25% and 5, lower is better" in slower["message"]
    # Lower is better is bounded on the ratio: 100 % is twice as long (a
    # mirrored interval would make it never), and within 1 s is no change.
    assert comparison.verdict(2.2, 3.0, 1.0, "lower", absolute=1.0, scale=27) == "regression"
    assert comparison.verdict(2.2, 3.0, 1.0, "lower", absolute=1.0, scale=0.4) == "no change detected"
    assert comparison.verdict(1.5, 3.0, 1.0, "lower", absolute=1.0, scale=27) == "inconclusive"


@pytest.mark.parametrize("baseline, candidate, message", [
    ([1.0, 2.0], [1.0, 2.0, 3.0], "baseline: 2 figures, at least 3 repetitions"),
    ([1.0, 2.0, float("nan")], [1.0, 2.0, 3.0], "finite and positive"),
])
def test_too_few_or_broken_figures_give_no_interval(baseline, candidate, message):
    with pytest.raises(ValueError, match=message):
        comparison.ratio_interval(baseline, candidate)


def test_every_figure_is_compared_or_named_as_why_not():
    regression = release_criteria.load_criteria().regression
    base = [{"images_per_sec[np=1,batch=16]": v, "busbw_Bps": 5e8, "no_tolerance": 1.0,
             "exposure.outside_open_ports": 0.0} for v in NP1[:3]]
    cand = [{"images_per_sec[np=1,batch=16]": v, "busbw_Bps": 5.1e8, "no_tolerance": 1.0,
             "exposure.outside_open_ports": 0.0} for v in NP1[3:6]]
    del cand[1]["busbw_Bps"]
    got = {f["figure"]: f for f in comparison.compare_all(base, cand, regression.tolerances, regression.not_compared)}
    assert sorted(got) == ["busbw_Bps", "images_per_sec[np=1,batch=16]", "no_tolerance"]
    assert got["busbw_Bps"]["verdict"] == "missing"
    assert got["busbw_Bps"]["message"] == "busbw_Bps: missing from repetition(s) candidate 2: not compared"
    assert got["no_tolerance"]["verdict"] == "no tolerance"
    assert got["images_per_sec[np=1,batch=16]"]["verdict"] != "missing"


# Bad input: one line before anything is deployed ------------------------------------------
@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "descriptors" / "profiles").mkdir(parents=True)
    (root / "descriptors" / "VERSION").write_text("0.2.0\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (root / "README").write_text("no descriptors yet")
    subprocess.run([*git, "add", "README"], check=True)
    subprocess.run([*git, "commit", "-qm", "before"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "0.2.0"], check=True)
    return root


def test_refs_are_checked_before_anything_is_deployed(repo):
    assert len(compare.resolve("HEAD", repo)) == 40
    with pytest.raises(RefarchError, match=r"compare: 'v9\.9\.9' names no commit"):
        compare.resolve("v9.9.9", repo)
    with pytest.raises(RefarchError, match=r"compare: HEAD~1 \([0-9a-f]{12}\) has no descriptors/VERSION"):
        compare.resolve("HEAD~1", repo)


def test_no_release_tag_asks_for_a_baseline(repo):
    with pytest.raises(RefarchError, match="no release tag below .*: name the baseline"):
        compare.previous_tag(repo)


def test_bad_input_is_one_line_before_anything_is_deployed(monkeypatch):
    monkeypatch.setattr(compare, "_up", lambda *a: pytest.fail("deployed"))
    with pytest.raises(RefarchError, match="-n 2: at least 3 repetitions"):
        compare.run("HEAD", repetitions=2)
    with pytest.raises(RefarchError, match="'no-such-ref' names no commit"):
        compare.run("no-such-ref")
    monkeypatch.setattr(compare, "memory_available", lambda: 8 * 2 ** 30)
    with pytest.raises(RefarchError, match=r"one cluster of 2 nodes with 6144 MiB each needs 12\.0 GiB, 8\.0 GiB "
                                           r"are available: give less memory per node"):
        compare.run("HEAD")


def test_repetitions_alternate_and_a_failure_tears_both_down_with_no_verdict(monkeypatch, tmp_path):
    monkeypatch.setenv("REFARCH_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setattr(compare, "runs_dir", lambda: tmp_path / "runs")
    monkeypatch.setattr(compare, "memory_available", lambda: 64 * 2 ** 30)
    order, downs = [], []

    def up(side, profile, overrides, log):
        side.run_id = f"hvd-{side.label}"
        return side.run_id

    def measure(side, junit):
        order.append(side.label)
        if len(order) == 5:
            raise RefarchError("compare: on the candidate test_scaling_table failed: np=2 ran past 900 s")
        return {"images_per_sec[np=1,batch=16]": 40.0}

    monkeypatch.setattr(compare, "_up", up)
    monkeypatch.setattr(compare, "_down", lambda side, log: downs.append(side.run_id))
    monkeypatch.setattr(compare, "measure", measure)
    with pytest.raises(RefarchError, match="ran past 900 s"):
        compare.run("HEAD", repetitions=3)
    assert order == ["baseline", "candidate", "candidate", "baseline", "baseline"]
    assert downs == ["hvd-baseline", "hvd-candidate"]
    assert not list((tmp_path / "runs").glob("compare-*/compare.json"))


def test_memory_for_one_cluster_measures_one_after_the_other(monkeypatch, tmp_path, capsys):
    """16 GiB available, 12 GiB a cluster: the baseline is deployed, measured
    n times and torn down before the candidate is deployed; compare.json
    and its page say so."""
    monkeypatch.setattr(compare, "runs_dir", lambda: tmp_path / "runs")
    monkeypatch.setattr(compare, "memory_available", lambda: 16 * 2 ** 30)
    events, values = [], iter(NP2 + NP2)

    def up(side, *a):
        events.append(f"up {side.label}")
        side.run_id = f"hvd-{side.label}"

    def measure(side, junit):
        events.append(side.label)
        return {"images_per_sec[np=2,batch=16]": next(values)}

    monkeypatch.setattr(compare, "_up", up)
    monkeypatch.setattr(compare, "_down", lambda side, log: events.append(f"down {side.run_id}"))
    monkeypatch.setattr(compare, "measure", measure)
    result = compare.run("HEAD", repetitions=3)
    assert events == ["up baseline", "baseline", "baseline", "baseline", "down hvd-baseline",
                      "up candidate", "candidate", "candidate", "candidate", "down hvd-candidate"]
    assert result["arrangement"] == "one after the other"
    assert result["run_ids"] == {"baseline": "hvd-baseline", "candidate": "hvd-candidate"}
    assert "24.0 GiB, 16.0 GiB are available: the baseline is measured first" in capsys.readouterr().err
    assert "drift between them is not cancelled" in (Path(result["folder"]) / "compare.html").read_text()


def test_a_failure_one_after_the_other_tears_down_only_what_is_up(monkeypatch, tmp_path):
    monkeypatch.setattr(compare, "runs_dir", lambda: tmp_path / "runs")
    monkeypatch.setattr(compare, "memory_available", lambda: 16 * 2 ** 30)
    downs = []

    def up(side, *a):
        side.run_id = f"hvd-{side.label}"
        if side.label == "candidate":
            raise RefarchError("compare: the candidate (worktree) did not deploy: terraform apply failed")

    monkeypatch.setattr(compare, "_up", up)
    monkeypatch.setattr(compare, "_down", lambda side, log: downs.append(side.run_id))
    monkeypatch.setattr(compare, "measure", lambda side, junit: {"images_per_sec[np=2,batch=16]": 40.0})
    with pytest.raises(RefarchError, match="did not deploy"):
        compare.run("HEAD", repetitions=3)
    assert downs == ["hvd-baseline", "hvd-candidate"]
    assert not list((tmp_path / "runs").glob("compare-*/compare.json"))


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGINT"])
def test_an_interrupted_comparison_tears_both_down_and_writes_no_verdict(monkeypatch, tmp_path, signum):
    """The signal arrives during the second repetition, as a cancelled CI
    job's SIGTERM or a user's Ctrl-C would."""
    import os
    import signal

    monkeypatch.setattr(compare, "runs_dir", lambda: tmp_path / "runs")
    monkeypatch.setattr(compare, "memory_available", lambda: 64 * 2 ** 30)
    downs, measured = [], []

    def measure(side, junit):
        measured.append(side.label)
        if len(measured) == 2:
            os.kill(os.getpid(), getattr(signal, signum))
        return {"images_per_sec[np=2,batch=16]": 40.0}

    monkeypatch.setattr(compare, "_up", lambda side, *a: setattr(side, "run_id", f"hvd-{side.label}"))
    monkeypatch.setattr(compare, "_down", lambda side, log: downs.append(side.run_id))
    monkeypatch.setattr(compare, "measure", measure)
    with pytest.raises(KeyboardInterrupt):
        compare.run("HEAD", repetitions=3)
    assert measured == ["baseline", "candidate"] and downs == ["hvd-baseline", "hvd-candidate"]
    assert not list((tmp_path / "runs").glob("compare-*/compare.json"))


def test_a_finished_comparison_writes_its_verdicts(monkeypatch, tmp_path):
    monkeypatch.setattr(compare, "runs_dir", lambda: tmp_path / "runs")
    monkeypatch.setattr(compare, "memory_available", lambda: 64 * 2 ** 30)
    values = iter(NP2 + NP2)
    monkeypatch.setattr(compare, "_up", lambda side, *a: setattr(side, "run_id", f"hvd-{side.label}"))
    monkeypatch.setattr(compare, "_down", lambda side, log: None)
    monkeypatch.setattr(compare, "measure", lambda side, junit: {"images_per_sec[np=2,batch=16]": next(values)})
    out = tmp_path / "validation" / "0.2.0" / "compare.json"
    result = compare.run("HEAD", repetitions=3, out=out)
    assert out.is_file() and result["baseline_commit"] and result["repetitions"] == 3
    assert [f["verdict"] for f in result["figures"]] == ["no change detected"]
    # The candidate is the working tree: the gate checks its descriptors against the release's.
    tree = version.descriptor_tree_hash()
    assert (result["candidate_tree_hash"], result["candidate_tree_hash_kind"]) == (tree.value, tree.kind)
    html = (Path(result["folder"]) / "compare.html").read_text()
    assert 'id="comparison-plot"' in html and "images_per_sec[np=2,batch=16]" in html
    assert '<tr class="no"><td>images_per_sec[np=2,batch=16]</td>' in html


def test_a_figure_one_repetition_lost_is_named_in_compare_json_and_the_page(monkeypatch, tmp_path):
    monkeypatch.setattr(compare, "runs_dir", lambda: tmp_path / "runs")
    monkeypatch.setattr(compare, "memory_available", lambda: 64 * 2 ** 30)
    values = iter(NP2 + NP2)
    monkeypatch.setattr(compare, "_up", lambda side, *a: setattr(side, "run_id", f"hvd-{side.label}"))
    monkeypatch.setattr(compare, "_down", lambda side, log: None)
    calls = []

    def measure(side, junit):
        calls.append(side.label)
        figs = {"images_per_sec[np=2,batch=16]": next(values)}
        return figs if len(calls) == 4 else {**figs, "busbw_Bps": 5e8}
    monkeypatch.setattr(compare, "measure", measure)
    result = compare.run("HEAD", repetitions=3)
    lost = next(f for f in result["figures"] if f["figure"] == "busbw_Bps")
    assert lost["verdict"] == "missing" and lost["missing_from"] == [f"{calls[3]} 2"]
    html = (Path(result["folder"]) / "compare.html").read_text()
    assert f"busbw_Bps: missing from repetition(s) {calls[3]} 2: not compared" in html


# Live comparisons on this machine, recorded -------------------------------------------------
DATA = Path(__file__).parent / "data" / "compare"


def _recorded(name: str) -> dict:
    import json

    return json.loads((DATA / name).read_text())


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("aa-*.json")))
def test_the_recorded_a_a_comparisons_never_report_a_regression(name):
    """HEAD against HEAD, interleaved: five at 3 repetitions each (579-615 s
    each, a machine that trained np=1 at 35-38 images/sec) and one at the
    default 5 with the stop-mode recovery and rejoin (1,169 s, np=1 at 62
    images/sec)."""
    aa = _recorded(name)
    regression = release_criteria.load_criteria().regression
    again = comparison.compare_all(aa["runs"]["baseline"], aa["runs"]["candidate"],
                                   {**regression.tolerances, **regression.side_by_side})
    assert [f["figure"] for f in again] == [f["figure"] for f in aa["figures"]]
    assert not [f for f in again if f["verdict"] == "regression"]
    assert not [f for f in aa["figures"] if f["verdict"] == "regression"]


def test_the_recorded_a_a_comparison_at_the_default_repetitions_measures_recovery_side_by_side():
    """At n=5 each figure the comparison selects has five repetitions a
    side, recovery and rejoin included; recovery and rejoin of one tree
    against itself: no change detected."""
    aa = _recorded("aa-head-head-n5-recovery.json")
    assert aa["repetitions"] == 5 and aa["arrangement"] == "side by side"
    assert all(len(aa["runs"][side]) == 5 for side in ("baseline", "candidate"))
    verdicts = {f["figure"]: f["verdict"] for f in aa["figures"]}
    assert verdicts["availability.recovery_s"] == verdicts["availability.rejoin_s"] == "no change detected"
    assert set(verdicts) >= {"images_per_sec[np=1,batch=16]", "images_per_sec[np=2,batch=16]", "scaling.efficiency",
                             "busbw_Bps"}


def test_the_recorded_seeded_slowdown_is_a_regression_with_both_medians_and_the_interval():
    """HEAD against a tree whose horovod role sets HOROVOD_FUSION_THRESHOLD=0
    (tensor fusion off), 3 repetitions each (595 s)."""
    slow = _recorded("seeded-fusion-off-n3.json")
    verdicts = {f["figure"]: f for f in slow["figures"]}
    np2 = verdicts["images_per_sec[np=2,batch=16]"]
    assert np2["verdict"] == "regression" and np2["ci95"][1] < 0.95
    assert np2["message"].startswith("images_per_sec[np=2,batch=16]: regression (candidate 34.01 against baseline "
                                     "40.24, median of 3 and 3; candidate/baseline 0.845, 95 % interval 0.768-0.896")
    assert verdicts["scaling.efficiency"]["verdict"] == "regression"
    assert verdicts["images_per_sec[np=1,batch=16]"]["verdict"] == "no change detected"  # one rank fuses nothing


def test_a_repetition_measures_recovery_and_keeps_a_figure_outside_the_profiles_reference(monkeypatch, tmp_path,
                                                                                          capsys):
    """An older release may recover past the profile's bound: its figure is
    still compared.  A property that was not measured (the node never went
    down), or any other failed test, ends the comparison."""
    import json

    run = tmp_path / "hvd-old"
    run.mkdir()
    monkeypatch.setattr(compare, "runs_dir", lambda: tmp_path)
    results = {"properties": [
        {"id": "availability.recovery_s", "verdict": "fail", "measured": 141.8},
        {"id": "availability.rejoin_s", "verdict": "pass", "measured": 30.2},
        {"id": "scaling.efficiency", "verdict": "pass", "measured": 0.55}],
        "smoke": {"scaling": [{"world_size": 2, "batch_size": 16, "images_per_sec": 8.1}]}}
    (run / "results.json").write_text(json.dumps(results))
    calls = []
    outcome = {"test_property[availability.recovery_s]": ("failed", "availability.recovery_s = 141.8 seconds "
                                                                     "is above the upper bound 5.3\nmore"),
               "test_property[availability.rejoin_s]": ("passed", "")}
    monkeypatch.setattr(compare.childrun, "run_checks", lambda *a, **kw: calls.append((a, kw)) or dict(outcome))
    side = compare.Side("baseline", "v0.1.0", tmp_path, "0.1.0", "hvd-old")
    figs = compare.measure(side, tmp_path / "j.xml")
    assert figs == {"availability.recovery_s": 141.8, "availability.rejoin_s": 30.2, "scaling.efficiency": 0.55,
                    "images_per_sec[np=2,batch=16]": 8.1}
    assert "availability.recovery_s" in calls[0][0][1] and calls[0][1]["extra_args"] == ("--long-properties",)
    assert "is outside the profile's reference; its figure is compared" in capsys.readouterr().err
    results["properties"][0] = {"id": "availability.recovery_s", "verdict": "error", "measured": None}
    (run / "results.json").write_text(json.dumps(results))
    with pytest.raises(RefarchError, match=r"on the baseline \(v0\.1\.0, run hvd-old\) "
                                           r"test_property\[availability\.recovery_s\] failed"):
        compare.measure(side, tmp_path / "j.xml")
    outcome["test_scaling_table"] = ("failed", "np=2 ran past 900 s")
    results["properties"][0]["verdict"] = "fail"
    results["properties"][0]["measured"] = 141.8
    (run / "results.json").write_text(json.dumps(results))
    with pytest.raises(RefarchError, match="test_scaling_table failed: np=2 ran past 900 s"):
        compare.measure(side, tmp_path / "j.xml")


def test_a_first_release_has_nothing_to_compare_when_the_pipeline_says_so(monkeypatch, capsys, tmp_path):
    """The tag pipeline's compare-local job runs `refarch compare
    --first-release-ok`: with no release tag below descriptors/VERSION it
    says so and passes; without the flag it is the one-line error."""
    from refarch import cli

    monkeypatch.setenv("REFARCH_RUNS_DIR", str(tmp_path / "runs"))

    def no_tag():
        raise RefarchError("compare: no release tag below 0.2.0 (v<MAJOR.MINOR.PATCH>): name the baseline")

    monkeypatch.setattr(compare, "previous_tag", no_tag)
    monkeypatch.setattr(compare, "run", lambda *a, **kw: pytest.fail("compared"))
    assert cli.main(["compare", "--first-release-ok"]) == 0
    assert "a first release: nothing to compare with" in capsys.readouterr().out
    assert cli.main(["compare"]) == 2
    assert "no release tag below 0.2.0" in capsys.readouterr().err
