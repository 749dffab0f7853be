"""Non-functional properties: one module per group (scaling, convergence,
communication, availability, exposure), each holding its property ids,
units and descriptions, the profile section that configures it, and its
measurements.  This registry is what the profile (which ids and units it
may name), the results, the report, the fault coverage and
``tests/integration/test_properties.py`` read.

A property is added in its group's module (a :class:`Property` in its
``GROUP``), with its reference in the profiles and its calibration; a new
group is a module here and one entry in :data:`GROUPS`.
"""

from __future__ import annotations

import warnings

import pytest

from . import availability, communication, convergence, exposure, scaling
from .base import Group, Measurement, Property, PropertySpec, Verdict, is_finite_number, judge

__all__ = ["GROUPS", "KNOWN", "Group", "Measurement", "Property", "PropertySpec", "Verdict", "by_id", "is_finite_number",
           "judge", "measure_and_judge"]

#: The property groups, in the order reports list them.
GROUPS: tuple[Group, ...] = (scaling.GROUP, convergence.GROUP, communication.GROUP, availability.GROUP,
                             exposure.GROUP)


def by_id() -> dict[str, tuple[Group, Property]]:
    """{property id: (its group, the property)} of every group."""
    return {f"{g.name}.{p.name}": (g, p) for g in GROUPS for p in g.properties}


#: Property id -> (unit, what is measured).  A profile may only name these.
KNOWN: dict[str, tuple[str, str]] = {pid: (p.unit, p.description) for pid, (_g, p) in by_id().items()}


def _skip(results, prop_id: str, spec: PropertySpec, reason: str) -> None:
    results.add_property(prop_id, spec, "skip", message=reason)
    pytest.skip(reason)


def measure_and_judge(prop_id: str, request, profile, results, run_state) -> None:
    """Measure ``prop_id`` on this run's cluster (``request``: pytest's
    fixture request, through which the measurement asks for the jobs it
    reads), judge it against the profile's reference and record it in
    ``results`` (refarch.judge.results.Results), skipped ones included.
    Adds the figure, unit, verdict, reference and source to the JUnit test
    case's properties; warns in the warning band.

    Raises:
        pytest.skip.Exception: the profile, the cluster or a missing
            --long-properties says why it is not measured.
        AssertionError: the verdict is fail or error (the message names the
            figure, the bound and the source).
    """
    spec = profile.property_specs()[prop_id]
    group, prop = by_id()[prop_id]
    if spec.skip:
        _skip(results, prop_id, spec, f"profile {profile.name}: {spec.skip}")
    if group.long and not request.config.getoption("refarch_long"):
        _skip(results, prop_id, spec, "not run: stops and starts nodes; measured with --long-properties "
                                      "(tox -e availability)")
    try:
        m = prop.measure(request)
    except pytest.skip.Exception as exc:
        results.add_property(prop_id, spec, "skip", message=str(exc))
        raise
    except BaseException as exc:
        results.add_property(prop_id, spec, "error", message=f"not measured: {exc}"[:2000])
        raise
    verdict = judge(prop_id, m.value, spec, m.detail, m.error)
    measured = m.value if is_finite_number(m.value) else None  # JSON has no NaN
    results.add_property(prop_id, spec, verdict.status, measured, verdict.message,
                         {"run_id": run_state.run_id, **m.evidence})
    node = getattr(request, "node", None)
    if node is not None:  # JUnit <properties> of this test case
        node.user_properties += [("measured", measured), ("unit", spec.unit), ("verdict", verdict.status),
                                 ("reference", spec.reference.model_dump_json(exclude_none=True)),
                                 ("source", spec.source.text + (f" {spec.source.url}" if spec.source.url else ""))]
    if verdict.status == "warn":
        warnings.warn(verdict.message, stacklevel=2)
    assert verdict.status not in ("fail", "error"), verdict.message
