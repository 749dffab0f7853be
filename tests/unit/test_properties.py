"""Properties as data: references with tolerances judged offline, the
profile's properties validated, and test_property fed recorded workload
results in place of a deployed cluster (F10: ranks that do not average
their gradients end with different weights)."""

import json
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from refarch import properties
from refarch.errors import ProfileError
from refarch.judge import checks
from refarch.judge.results import Results
from refarch.profile import load_profile
from refarch.properties import figures
from tests.integration import test_properties

DATA = Path(__file__).parent / "data" / "properties"


def _recorded(name: str) -> dict:
    """A REFARCH_RESULT recorded from a real run on the local cloud."""
    return checks.parse_training_result((DATA / name).read_text(encoding="utf-8"))


def _spec(prop_id: str, **overrides):
    profile = load_profile("local", {f"properties.{prop_id}.{k}": v for k, v in overrides.items()})
    return profile, profile.property_specs()[prop_id]


def test_judge_passes_within_the_bounds():
    _, spec = _spec("scaling.efficiency")
    verdict = properties.judge("scaling.efficiency", 0.58, spec)
    assert verdict.status == "pass" and "lower 0.35" in verdict.message


def test_judge_fails_below_the_lower_bound_with_figure_bound_and_source():
    _, spec = _spec("scaling.efficiency", **{"reference.lower": 0.99})
    verdict = properties.judge("scaling.efficiency", 0.574, spec, " (np=1 37.2, np=2 42.7 images/sec)")
    assert verdict.status == "fail"
    assert verdict.message.startswith("scaling.efficiency = 0.574 ratio (np=1 37.2, np=2 42.7 images/sec) "
                                      "is below the lower bound 0.99 (target 0.55; source: measured on")
    assert "<https://arxiv.org/abs/1802.05799>" in verdict.message


def test_judge_fails_above_the_upper_bound():
    _, spec = _spec("convergence.ranks_diverged")
    verdict = properties.judge("convergence.ranks_diverged", 1, spec)
    assert verdict.status == "fail" and "= 1 ranks is above the upper bound 0" in verdict.message


def test_judge_warns_in_the_band_and_flags_suspiciously_high_figures():
    _, spec = _spec("scaling.efficiency")
    assert properties.judge("scaling.efficiency", 0.40, spec).status == "warn"
    high = properties.judge("scaling.efficiency", 0.82, spec)  # F10: no gradient averaging
    assert high.status == "warn" and "suspiciously far above the reference" in high.message


def test_efficiency_arithmetic():
    assert figures.scaling_efficiency(44.0, 37.6, 2) == pytest.approx(0.5851, abs=1e-4)
    assert figures.scaling_efficiency(80.0, 10.0, 8) == 1.0
    with pytest.raises(ValueError):
        figures.scaling_efficiency(10.0, 0.0, 2)
    with pytest.raises(ValueError):
        figures.scaling_efficiency(10.0, 5.0, 0)


def test_diverged_ranks_and_loss_gap():
    assert properties.convergence.diverged_ranks(["a", "a", "b", "a"]) == [2]
    assert properties.convergence.diverged_ranks(["a", "a"]) == []
    assert properties.convergence.loss_gap(0.11, 0.10) == pytest.approx(0.1)
    with pytest.raises(ValueError):
        properties.convergence.loss_gap(0.1, 0.0)


@pytest.mark.parametrize("override, message", [
    ({"properties.scaling.speed": {"unit": "x", "reference": {"lower": 1}, "source": {"text": "abc"}}},
     r"properties\.scaling\.speed: unknown property"),
    ({"properties.scaling.efficiency.unit": "percent"}, r"unit 'percent', measured in 'ratio'"),
    ({"properties.scaling.efficiency.reference": {"target": 0.5}}, r"needs a lower or an upper bound"),
    ({"properties.convergence.loss_gap.reference.lower": 0.5}, r"lower 0.5 is above upper 0.15"),
])
def test_bad_properties_are_one_line_profile_errors(override, message):
    with pytest.raises(ProfileError, match=message):
        load_profile("local", override)


def test_every_known_property_has_a_measurement_and_a_unit():
    assert all(callable(p.measure) for _g, p in properties.by_id().values())


# test_property fed recorded results ---------------------------------------------------
CLUSTER = SimpleNamespace(contract=SimpleNamespace(node_names=["node1", "node2"]))


def _request(**fixtures):
    values = {"cluster": CLUSTER, **fixtures}
    return SimpleNamespace(getfixturevalue=lambda name: values[name])


def _run_property(prop_id, profile, **fixtures):
    results = Results("hvd-unit-000000", "local", "local")
    state = SimpleNamespace(run_id="hvd-unit-000000")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            test_properties.test_property(prop_id, _request(profile=profile, **fixtures), profile, results, state)
        finally:
            recorded = results.properties[-1] if results.properties else None
    return recorded, caught


def _convergence(np2_file="convergence-np2.out"):
    return {1: _recorded("convergence-np1.out"), 2: _recorded(np2_file)}


@pytest.mark.parametrize("prop_id", ["convergence.test_accuracy", "convergence.ranks_diverged",
                                     "convergence.loss_gap"])
def test_recorded_convergence_passes(prop_id):
    recorded, _ = _run_property(prop_id, load_profile("local"), convergence_runs=_convergence())
    assert recorded["verdict"] == "pass", recorded["message"]
    assert recorded["evidence"]["run_id"] == "hvd-unit-000000"


def test_training_without_gradient_averaging_fails_convergence():
    """F10 recorded: DistributedGradientTape removed on every node."""
    runs = _convergence("convergence-np2-no-averaging.out")
    with pytest.raises(AssertionError, match=r"convergence.ranks_diverged = 1 ranks \(after training, the weights "
                                             r"of rank 1 on node2 differ from rank 0's on node1: the ranks did not "
                                             r"average their gradients\) is above the upper bound 0"):
        _run_property("convergence.ranks_diverged", load_profile("local"), convergence_runs=runs)


def test_an_out_of_reach_reference_fails_with_figure_bound_and_source():
    single = _recorded("smoke-np1.out")
    table = [figures.scaling_row(single, single), figures.scaling_row(_recorded("smoke-np2.out"), single)]
    profile = load_profile("local", {"properties.scaling.efficiency.reference.lower": 0.99})
    with pytest.raises(AssertionError, match=r"scaling.efficiency = 0\.\d+ ratio \(95 % interval [\d.]+-[\d.]+ %; "
                                             r"np=2 .* images/sec, np=1 [\d.]+ from the np=1 job; medians of the "
                                             r"steps\) is below the lower bound 0.99 \(target 0.55; source: "):
        _run_property("scaling.efficiency", profile, scaling_runs=table)


def test_a_property_the_profile_skips_is_recorded_with_its_reason():
    profile = load_profile("local", {"properties.convergence.loss_gap.skip": "no np=1 baseline on this cloud"})
    with pytest.raises(pytest.skip.Exception, match="no np=1 baseline"):
        _run_property("convergence.loss_gap", profile)
    results = Results("r", "local", "local")
    results.add_property("convergence.loss_gap", profile.property_specs()["convergence.loss_gap"], "skip",
                         message="profile local: no np=1 baseline on this cloud")
    assert any("convergence.loss_gap" in line and "SKIP" in line for line in results.summary_lines())


def test_a_single_node_cluster_skips_cross_node_properties():
    one = SimpleNamespace(contract=SimpleNamespace(node_names=["node1"]))
    results = Results("r", "local", "local")
    with pytest.raises(pytest.skip.Exception, match="one node"):
        test_properties.test_property("scaling.efficiency", _request(cluster=one), load_profile("local"),
                                      results, SimpleNamespace(run_id="r"))
    assert results.properties[0]["verdict"] == "skip"


def test_results_json_carries_every_property(tmp_path):
    recorded, _ = _run_property("convergence.test_accuracy", load_profile("local"), convergence_runs=_convergence())
    results = Results("r", "local", "local")
    results.properties.append(recorded)
    data = json.loads(results.write(tmp_path / "results.json").read_text())
    prop = data["properties"][0]
    assert {"id", "unit", "measured", "reference", "verdict", "source", "evidence"} <= set(prop)
    assert prop["source"]["url"].startswith("https://")


def test_summary_gives_figure_verdict_bounds_and_source():
    recorded, _ = _run_property("convergence.test_accuracy", load_profile("local"), convergence_runs=_convergence())
    results = Results("r", "local", "local")
    results.properties.append(recorded)
    lines = results.summary_lines()
    prop = next(i for i, line in enumerate(lines) if "convergence.test_accuracy" in line)
    assert "PASS" in lines[prop] and "lower 0.9" in lines[prop]
    assert lines[prop + 1].strip().startswith("source: scikit-learn's digits")


def test_junit_gets_the_figure_and_its_reference(tmp_path):
    node = SimpleNamespace(user_properties=[])
    values = {"cluster": CLUSTER, "convergence_runs": _convergence()}
    request = SimpleNamespace(getfixturevalue=lambda name: values[name], node=node)
    test_properties.test_property("convergence.loss_gap", request, load_profile("local"),
                                  Results("r", "local", "local"), SimpleNamespace(run_id="r"))
    props = dict(node.user_properties)
    assert props["verdict"] == "pass" and props["unit"] == "ratio" and '"upper":0.15' in props["reference"]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), None])
def test_a_figure_that_is_not_finite_is_an_error_never_a_pass(value):
    _, spec = _spec("convergence.loss_gap")
    verdict = properties.judge("convergence.loss_gap", value, spec)
    assert verdict.status == "error"
    assert "not a finite figure" in verdict.message and verdict.message.startswith("convergence.loss_gap = ")


def test_a_nan_training_loss_gives_an_error_verdict_not_a_passing_loss_gap(tmp_path):
    """Every comparison with NaN is false: judged as a number, a NaN loss gap
    passed the upper bound."""
    runs = _convergence()
    runs[2] = {**runs[2], "train_loss": float("nan")}
    results = Results("hvd-unit-000000", "local", "local")
    state = SimpleNamespace(run_id="hvd-unit-000000")
    with pytest.raises(AssertionError, match=r"convergence\.loss_gap = nan ratio .*not a finite figure"):
        test_properties.test_property("convergence.loss_gap", _request(convergence_runs=runs), load_profile("local"),
                                      results, state)
    recorded = results.properties[-1]
    assert recorded["verdict"] == "error" and recorded["measured"] is None
    written = json.loads(results.write(tmp_path / "results.json").read_text(),
                         parse_constant=lambda c: pytest.fail(f"results.json holds {c}"))
    assert written["properties"][-1]["evidence"]["train_loss"]["2"] == "nan"


def test_every_group_section_is_the_profile_field_of_that_model():
    """The registry is what the profile reads: a group's section is the
    profile's field of the same name and model, and the profile accepts
    exactly the registry's ids and units."""
    from refarch.profile import Profile

    for group in properties.GROUPS:
        if group.section:
            key, model = group.section
            assert Profile.model_fields[key].annotation is model, (group.name, key)
        assert len(group.ids()) == len(set(group.ids())) > 0, group.name
    assert set(properties.KNOWN) == set(properties.by_id())
