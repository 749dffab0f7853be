"""The environments of the suite's CI and their two tiers, read from
``ci/environments.yml``.

An environment is a tox environment, or part of one (pytest arguments that
select the part: ``faults:checks``), with:

- ``tier``: ``change`` (runs on every change) or ``heavy`` (runs when no
  pass on this machine has its current key, within the budget; all of them
  on ``ci/test.sh --all``);
- ``lane``: a change-tier environment that runs beside the other lane
  environments (it judges no figure); the others run alone after them;
- ``inputs``: the files and folders (relative to the checkout; ``"."`` is
  every file git lists) its verdict depends on besides the suite's own
  modules, which count as its processes loaded them (:mod:`.reuse`);
- ``reference_s``: its seconds on a reference machine of the kind (the
  timings history, ``validation/timings.json``), scaled to
  this machine until this machine has a time of its own (:mod:`.schedule`);
- ``gitlab``: the GitLab job that runs it, whose ``rules:changes`` are made
  from the inputs (:mod:`.gitlab`).

The ``molecule`` entry stands for one environment per Molecule scenario
(``molecule:<scenario>``), whose inputs are the scenario's
(:func:`refarch.tools.rolecache.scenario_inputs`).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import RefarchError
from ..paths import ROOT

#: The definitions (relative to the checkout).
DEFINITIONS = Path("ci/environments.yml")


class Environment(BaseModel):
    """One environment of the suite's CI (module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    tier: Literal["change", "heavy"]
    tox: str
    #: pytest arguments that select the part of the tox environment.
    pytest: tuple[str, ...] = ()
    #: Extra arguments of the tox environment's own command (molecule: -s NAME).
    args: tuple[str, ...] = ()
    inputs: tuple[str, ...]
    reference_s: float = Field(gt=0)
    lane: bool = False
    #: Runs pytest: gets --junitxml and the extra pytest arguments of ci/test.sh.
    junit: bool = True
    gitlab: str | None = None

    @property
    def heavy(self) -> bool:
        return self.tier == "heavy"


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tier: Literal["change", "heavy"]
    tox: str
    pytest: list[str] = []
    inputs: list[str] = []
    reference_s: float | None = None
    scenarios: dict[str, float] | None = None
    lane: bool = False
    junit: bool = True
    gitlab: str | None = None


class Definitions(BaseModel):
    """``ci/environments.yml``: the budget (seconds after ci/test.sh started
    after which no heavy environment starts), the margin (seconds past the
    budget after which a running one is stopped), the age (seconds) after
    which a pass is not honoured, and the environments in their order."""

    model_config = ConfigDict(frozen=True)

    budget_s: float = Field(gt=0)
    margin_s: float = Field(ge=0)
    max_age_s: float = Field(gt=0)
    environments: tuple[Environment, ...]

    def get(self, name: str) -> Environment:
        """The environment ``name``.

        Raises:
            RefarchError: there is none (naming those there are).
        """
        for env in self.environments:
            if env.name == name:
                return env
        raise RefarchError(f"no CI environment {name!r} (there are: {', '.join(self.names())})")

    def names(self, tier: str | None = None) -> list[str]:
        return [e.name for e in self.environments if tier is None or e.tier == tier]

    def tier(self, tier: str) -> list[Environment]:
        return [e for e in self.environments if e.tier == tier]


def _expand(name: str, entry: _Entry, root: Path) -> list[Environment]:
    from ..tools import rolecache

    common = {"tier": entry.tier, "tox": entry.tox, "pytest": tuple(entry.pytest), "lane": entry.lane,
              "junit": entry.junit}
    if entry.scenarios is None:
        if entry.reference_s is None or not entry.inputs:
            raise ValueError("needs reference_s and inputs (or scenarios)")
        return [Environment(name=name, inputs=tuple(entry.inputs), reference_s=entry.reference_s,
                            gitlab=entry.gitlab, **common)]
    out = []
    for scenario, seconds in entry.scenarios.items():
        if not (root / "descriptors/ansible/molecule" / scenario / "molecule.yml").is_file():
            raise ValueError(f"scenario {scenario} has no descriptors/ansible/molecule/{scenario}/molecule.yml")
        inputs = tuple(p.relative_to(root).as_posix()
                       for p in rolecache.scenario_inputs(scenario, root, root / "descriptors"))
        gitlab = entry.gitlab.format(scenario=scenario.replace("_", "-")) if entry.gitlab else None
        out.append(Environment(name=f"{name}:{scenario}", inputs=inputs, reference_s=seconds, args=("-s", scenario),
                               gitlab=gitlab, **common))
    return out


def load(root: Path = ROOT) -> Definitions:
    """The definitions of ``root/ci/environments.yml``, the ``molecule``
    entry expanded to one environment per scenario.

    Raises:
        RefarchError: the file is missing, not YAML, or an entry is invalid
            (one line naming the entry and the field).
    """
    path = root / DEFINITIONS
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise RefarchError(f"{DEFINITIONS}: cannot be read: {exc}") from None
    envs: list[Environment] = []
    for name, raw in (data.get("environments") or {}).items():
        if isinstance(raw, dict) and isinstance(raw.get("inputs"), list):  # a YAML alias is a list in the list
            raw = {**raw, "inputs": [p for item in raw["inputs"] for p in (item if isinstance(item, list) else [item])]}
        try:
            envs += _expand(name, _Entry.model_validate(raw), root)
        except (ValidationError, ValueError) as exc:
            first = exc.errors()[0] if isinstance(exc, ValidationError) else None
            why = f"{'.'.join(map(str, first['loc']))}: {first['msg']}" if first else str(exc)
            raise RefarchError(f"{DEFINITIONS}: environment {name}: {why}") from None
    try:
        return Definitions(budget_s=data.get("budget_s"), margin_s=data.get("margin_s"),
                           max_age_s=data.get("max_age_s"), environments=tuple(envs))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise RefarchError(f"{DEFINITIONS}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


@cache
def definitions() -> Definitions:
    """:func:`load` of this checkout, read once per process."""
    return load(ROOT)
