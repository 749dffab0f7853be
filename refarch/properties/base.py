"""What every property group is made of: a property's declaration, its
reference as a profile writes it, a measured figure, and the judgement of
that figure against the reference.

A profile's ``properties:`` section holds, per property id (``group.name``,
e.g. ``scaling.efficiency``), the unit, the reference (target, lower and/or
upper bound, optional warning band) and its source.  References with
tolerances kept as data follow ReFrame's performance references
(https://reframe-hpc.readthedocs.io/en/stable/tutorial.html, "reference"
tuples of target, lower and upper threshold per system).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from pydantic import BaseModel, ConfigDict, Field, model_validator


class Strict(BaseModel):
    """A profile section: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Bounds(Strict):
    """A reference with tolerances (after ReFrame's references): the run
    fails below ``lower`` or above ``upper`` and warns below ``warn_below``
    or above ``warn_above``; ``target`` is what the architecture reaches."""

    target: float | None = None
    """What the architecture reaches, in the property's unit: shown beside the figure in the verdict, never judged."""
    lower: float | None = None
    """The property fails below this figure (in its unit); a reference needs ``lower`` or ``upper``."""
    upper: float | None = None
    """The property fails above this figure (in its unit); a reference needs ``lower`` or ``upper``."""
    warn_below: float | None = None
    """The property warns below this figure (the warning band above ``lower``)."""
    warn_above: float | None = None
    """The property warns above this figure: far better than the reference is suspicious (ranks not averaging)."""

    @model_validator(mode="after")
    def _bounded(self) -> Bounds:
        if self.lower is None and self.upper is None:
            raise ValueError("a reference needs a lower or an upper bound")
        if self.lower is not None and self.upper is not None and self.lower > self.upper:
            raise ValueError(f"lower {self.lower} is above upper {self.upper}")
        return self


class Source(Strict):
    """Where a reference comes from: text (a paper, a measurement on a named
    machine) and a URL where one exists."""

    text: str = Field(min_length=3)
    """Where the reference's figures come from (a paper, a measurement on a named machine), quoted in every verdict."""
    url: str | None = Field(None, pattern=r"^https?://")
    """An http(s) URL of that source, quoted in the verdict beside ``text``."""


class PropertySpec(Strict):
    """One non-functional property of the profile (ids and units: the
    registry, :data:`refarch.properties.KNOWN`).  ``skip`` is the profile's
    reason why the property cannot run on it (reported as skipped, never
    absent)."""

    unit: str
    """The property's unit (ratio, seconds, ranks, ports, ...); must be the unit the registry measures it in."""
    reference: Bounds
    """The bounds the measured figure is judged against (refarch.properties.base.judge)."""
    source: Source
    """Where the reference comes from."""
    skip: str | None = None
    """Why the property cannot run on this profile: it is then reported as skipped with this reason, never absent."""


@dataclass(frozen=True)
class Verdict:
    """``status`` is pass, warn, fail or error (no finite figure);
    ``message`` names the figure, the bound it crossed and the reference's
    source."""

    status: str
    message: str


@dataclass
class Measurement:
    """One measured value (in the property's unit) and where it came from
    (``evidence``: run, world sizes, log files), plus optional detail for
    the message (e.g. which ranks differ) and, for a figure that cannot be
    judged, the reason (``error``)."""

    value: float
    evidence: dict = field(default_factory=dict)
    detail: str = ""
    #: Why the figure, though measured, cannot be judged (e.g. an
    #: efficiency above 1 at some world size): the verdict is then error.
    error: str = ""


#: A measurement: pytest's fixture request (it asks for the fixtures whose
#: jobs it reads: ``request.getfixturevalue("scaling_runs")``) -> the figure.
#: It calls pytest.skip with the reason a property cannot run on this
#: cluster, and pytest.fail when the job it reads proves nothing.
Measure = Callable[..., Measurement]


@dataclass(frozen=True)
class Property:
    """One property of a group: ``name`` (the id is ``group.name``),
    ``unit``, ``description`` (what is measured, for reports and the fault
    coverage) and ``measure``."""

    name: str
    unit: str
    description: str
    measure: Measure


@dataclass(frozen=True)
class Group:
    """A property group (scaling, convergence, communication, availability,
    exposure): its properties, the profile section that configures their
    measurement (``section``: top-level key of the profile -> its pydantic
    model), and ``long``: the group stops and starts nodes, so it is
    measured only when asked for (pytest --long-properties)."""

    name: str
    properties: tuple[Property, ...]
    section: tuple[str, type[Strict]] | None = None
    long: bool = False

    def ids(self) -> list[str]:
        """The property ids of the group, ``group.name``, in its order."""
        return [f"{self.name}.{p.name}" for p in self.properties]


def is_finite_number(value) -> bool:
    """True for an int or float (not bool) that is neither NaN nor infinite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def across_nodes(request) -> int:
    """The cluster's node count; skips a one-node cluster (nothing runs
    across nodes there)."""
    n = len(request.getfixturevalue("cluster").contract.node_names)
    if n == 1:
        pytest.skip("not run: the cluster has one node, nothing runs across nodes")
    return n


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def judge(prop_id: str, value: float, spec: PropertySpec, detail: str = "", error: str = "") -> Verdict:
    """Judge ``value`` against ``spec``.

    Fails below ``reference.lower`` or above ``reference.upper``; warns below
    ``warn_below``, or above ``warn_above`` (a figure far better than the
    reference is suspicious: e.g. ranks that do not exchange gradients scale
    "too well").  The message names the property, the figure with its unit,
    the bound, the target and the source; ``detail`` (e.g. " (np=1 37.2,
    np=2 41.0 images/sec)") follows the figure.

    A figure that is missing or not finite (None, NaN, infinity: every
    comparison with NaN is false, so it would pass every bound) is an
    ``error`` verdict: the property was not measured.  So is a figure with
    an ``error`` (why it cannot be judged, see :class:`Measurement`).
    """
    ref, unit = spec.reference, spec.unit
    if error:
        shown = _fmt(value) if is_finite_number(value) else repr(value)
        return Verdict("error", f"{prop_id} = {shown} {unit}{detail} cannot be judged (an error, never a pass): "
                                f"{error}")
    if not is_finite_number(value):
        return Verdict("error", f"{prop_id} = {value!r} {unit}{detail}: not a finite figure, so nothing was "
                                "measured (an error, never a pass)")
    figure = f"{prop_id} = {_fmt(value)} {unit}{detail}"
    context = []
    if ref.target is not None:
        context.append(f"target {_fmt(ref.target)}")
    source = f"source: {spec.source.text}" + (f" <{spec.source.url}>" if spec.source.url else "")
    tail = f" ({'; '.join([*context, source])})"
    if ref.lower is not None and value < ref.lower:
        return Verdict("fail", f"{figure} is below the lower bound {_fmt(ref.lower)}{tail}")
    if ref.upper is not None and value > ref.upper:
        return Verdict("fail", f"{figure} is above the upper bound {_fmt(ref.upper)}{tail}")
    if ref.warn_below is not None and value < ref.warn_below:
        return Verdict("warn", f"{figure} is in the warning band (below {_fmt(ref.warn_below)}){tail}")
    if ref.warn_above is not None and value > ref.warn_above:
        return Verdict("warn", f"{figure} is suspiciously far above the reference (warn above "
                               f"{_fmt(ref.warn_above)}): check that the ranks really work together{tail}")
    bounds = [f"lower {_fmt(ref.lower)}"] if ref.lower is not None else []
    bounds += [f"upper {_fmt(ref.upper)}"] if ref.upper is not None else []
    return Verdict("pass", f"{figure} is within the reference ({', '.join(bounds)}){tail}")
