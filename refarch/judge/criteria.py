"""The release criteria (``validation/release-criteria.yml``): which
validation records a release needs and what each must show, which warns
are accepted, and how each figure is compared with the previous release
(a tolerance, or the reason it is not compared).  Read by the release gate
(:mod:`refarch.judge.gate`) and by ``refarch compare``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .. import properties
from ..errors import RefarchError
from . import records as rec

CRITERIA_FILE = rec.VALIDATION_DIR / "release-criteria.yml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RecordRule(_Strict):
    """What one required record must show."""

    #: Property ids that must have been measured and passed.
    must_pass: list[str] = Field(default_factory=list)
    #: Reference overrides (``properties.<id>.reference.<key>`` -> value)
    #: the record is made and judged with (e.g. a 3-node variant on 2
    #: cores); any other override of a reference refuses the record.
    references: dict[str, float] = Field(default_factory=dict)


class Tolerance(_Strict):
    """How far a figure may move the wrong way before it is a regression:
    more than ``relative`` (a fraction of the previous figure) *and* more
    than ``absolute`` (in the figure's unit)."""

    relative: float = Field(ge=0)
    absolute: float = Field(default=0, ge=0)
    better: Literal["higher", "lower"]


class Regression(_Strict):
    on_regression: Literal["fail", "warn"] = "fail"
    #: Figure name (or its name before ``[``) -> tolerance.
    tolerances: dict[str, Tolerance] = Field(default_factory=dict)
    #: Tolerances of a side-by-side comparison (refarch compare), tighter
    #: than between records of two days: both sides share the machine and
    #: the hour.  A figure not named here takes its ``tolerances`` entry.
    side_by_side: dict[str, Tolerance] = Field(default_factory=dict)
    #: Figure name (or its name before ``[``) -> why it is judged by its
    #: own bounds in every run and not against the previous release.
    not_compared: dict[str, str] = Field(default_factory=dict)
    #: Figures (or names before ``[``) whose "inconclusive" side-by-side
    #: verdict a release accepts; any other inconclusive figure fails it.
    accept_inconclusive: list[str] = Field(default_factory=list)

    def unjudged(self, figures: list[str]) -> list[str]:
        """The figure names of ``figures`` with neither a tolerance nor a
        reason in :attr:`not_compared`, and those with both."""
        out = []
        for name in figures:
            tol, why = name in self.tolerances, name in self.not_compared
            if tol == why:
                out.append(f"figure {name} has {'both a tolerance and' if tol else 'neither a tolerance nor'} "
                           "a not_compared reason")
        return out


class ReleaseCriteria(_Strict):
    """The release criteria (``validation/release-criteria.yml``)."""

    #: Record name (a profile, or the --name of a record) -> what it must show.
    records: dict[str, RecordRule]
    #: Property ids whose ``warn`` verdict is accepted (reported, not failed).
    may_warn: list[str] = Field(default_factory=list)
    regression: Regression = Field(default_factory=Regression)
    #: A record made by another judge (refarch.version.judge_hash: the
    #: suite, its checks, the profiles or these criteria changed since) fails
    #: the gate or is reported as a warning.
    on_other_judge: Literal["fail", "warn"] = "warn"


def load_criteria(path: Path = CRITERIA_FILE) -> ReleaseCriteria:
    """The release criteria file, validated.

    Raises:
        RefarchError: missing, not YAML, or not release criteria (the first error).
    """
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        criteria = ReleaseCriteria.model_validate(data)
    except OSError as exc:
        raise RefarchError(f"{path}: cannot read the release criteria ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise RefarchError(f"{path}: not YAML ({exc})") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise RefarchError(f"{path}: {where}: {err['msg']}") from None
    from .records import FIGURE_NAMES

    unjudged = criteria.regression.unjudged([*FIGURE_NAMES, *sorted(properties.KNOWN)])
    if unjudged:
        raise RefarchError(f"{path}: regression: {unjudged[0]} (every figure is compared, or says why not)")
    return criteria
