"""Every property bound of the local profile follows from repeated
measurements on this kind of machine (descriptors/profiles/calibration/
local.yml): the bound is its rule's multiple of the worst (or best) figure,
within 5 %; a bound looser than 10x the measured figure needs a sentence why."""

from pathlib import Path

import pytest
import yaml

from refarch.profile import load_profile

CALIBRATION = Path(__file__).parents[2] / "descriptors" / "profiles" / "calibration" / "local.yml"
BOUNDS = ("lower", "upper", "warn_below", "warn_above")


def _calibration() -> dict:
    return yaml.safe_load(CALIBRATION.read_text(encoding="utf-8"))["properties"]


def _bounded():
    specs = load_profile("local").property_specs()
    return {pid: spec for pid, spec in specs.items()
            if any(getattr(spec.reference, b) is not None for b in BOUNDS)}


def test_every_bounded_property_has_a_calibration():
    missing = sorted(set(_bounded()) - set(_calibration()))
    assert not missing, f"no calibration in {CALIBRATION.name} for {missing}"


@pytest.mark.parametrize("prop_id", sorted(_bounded()))
def test_bounds_follow_from_the_measured_figures(prop_id):
    cal = _calibration().get(prop_id)
    if cal is None:
        pytest.fail(f"{prop_id}: no calibration")
    spec = _bounded()[prop_id]
    measured = cal["measured"]
    assert len(measured) >= 5 and len(measured) == len(cal["runs"]), f"{prop_id}: fewer than 5 runs, or runs != figures"
    for bound in BOUNDS:
        value = getattr(spec.reference, bound)
        rule = cal["bounds"].get(bound)
        if value is None:
            assert rule is None, f"{prop_id}: calibration has {bound}, the profile does not"
            continue
        assert rule is not None, f"{prop_id}: {bound} {value} has no rule in the calibration"
        base = min(measured) if rule["of"] == "min" else max(measured)
        want = base * rule["times"]
        assert abs(value - want) <= 0.05 * abs(want) + 1e-9, (
            f"{prop_id}: {bound} is {value}, the rule ({rule['of']} {base} x {rule['times']}) gives {want:.4g}")
        loose = (value / base if bound in ("upper", "warn_above") else base / value) if base and value else 1
        assert loose <= 10 or rule.get("why"), f"{prop_id}: {bound} {value} is {loose:.0f}x the measured {base}: say why"


def _averaging():
    return {pid: cal["averaging"] for pid, cal in _calibration().items() if "averaging" in cal}


@pytest.mark.parametrize("prop_id", sorted(_averaging()))
def test_a_bound_meant_to_catch_training_without_averaging_lies_between_both_distributions(prop_id):
    """Measured side by side with and without gradient averaging (FAULTS
    F10): a property that says it separates them has its failing bound
    strictly between the two; one that cannot says why."""
    both = _averaging()[prop_id]
    assert len(both["with"]) >= 5 and len(both["without"]) >= 5, f"{prop_id}: fewer than 5 jobs a side"
    if not both["separates"]:
        assert both.get("why"), f"{prop_id}: does not separate the two and says no why"
        return
    ref = _bounded()[prop_id].reference
    if ref.upper is not None:
        assert max(both["with"]) < ref.upper < min(both["without"]), (prop_id, ref.upper)
    else:
        assert min(both["with"]) > ref.lower > max(both["without"]), (prop_id, ref.lower)
