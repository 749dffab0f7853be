"""The release gate: may this architecture version be released?

``refarch gate VERSION`` reads the release policy (``validation/policy.yml``)
and the validation records of ``VERSION`` (:mod:`refarch.records`). It
passes only when

- ``VERSION`` is what ``descriptors/VERSION`` says,
- every record the policy requires exists, was made for exactly the
  descriptor tree on disk (tree hash), and has no failed or errored check,
- every property the policy requires of that record passed (or warned,
  where the policy lets it warn),

and compares each figure with the previous version's record of the same
name (images/sec per world size, efficiency, bus bandwidth, recovery time,
run time), with a tolerance per figure kept in the policy; a regression
fails the gate or only warns, as the policy says. A passing gate writes
``validation/<VERSION>/gate.json``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import records as rec
from . import version as ver
from .errors import RefarchError

POLICY_FILE = rec.VALIDATION_DIR / "policy.yml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RecordRule(_Strict):
    """What one required record must show."""

    #: Property ids that must have been measured and passed.
    must_pass: list[str] = Field(default_factory=list)


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


class Policy(_Strict):
    """The release policy (``validation/policy.yml``)."""

    #: Record name (a profile, or the --name of a record) -> what it must show.
    records: dict[str, RecordRule]
    #: Property ids whose ``warn`` verdict is accepted (reported, not failed).
    may_warn: list[str] = Field(default_factory=list)
    regression: Regression = Field(default_factory=Regression)


def load_policy(path: Path = POLICY_FILE) -> Policy:
    """The policy file, validated.

    Raises:
        RefarchError: missing, not YAML, or not a policy (the first error).
    """
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return Policy.model_validate(data)
    except OSError as exc:
        raise RefarchError(f"{path}: cannot read the release policy ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise RefarchError(f"{path}: not YAML ({exc})") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise RefarchError(f"{path}: {where}: {err['msg']}") from None


@dataclass
class GateResult:
    """The gate's verdict: ``problems`` fail it; ``warnings`` (accepted
    warns, regressions the policy only warns about) do not."""

    version: str
    tree_hash: str
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    regressions: list[dict] = field(default_factory=list)
    previous: dict[str, str] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict:
        return {"version": self.version, "tree_hash": self.tree_hash, "passed": self.passed,
                "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "problems": self.problems,
                "warnings": self.warnings, "regressions": self.regressions, "previous_versions": self.previous}


def previous_version(version: str, name: str, root: Path) -> str | None:
    """The highest version below ``version`` under ``root`` that has a
    record called ``name``; None for the first release."""
    key = ver.parse_version(version)
    best = None
    for path in root.glob(f"*/{name}.json"):
        try:
            candidate = ver.parse_version(path.parent.name)
        except RefarchError:
            continue
        if candidate < key and (best is None or candidate > best[0]):
            best = (candidate, path.parent.name)
    return best[1] if best else None


def tolerance_for(figure: str, policy: Policy) -> Tolerance | None:
    """The tolerance of ``figure`` by its full name, else by its name
    before ``[`` (``images_per_sec[np=2,batch=16]`` -> ``images_per_sec``)."""
    tols = policy.regression.tolerances
    return tols.get(figure) or tols.get(figure.split("[", 1)[0])


def regressions(record: dict, previous: dict, policy: Policy) -> list[dict]:
    """Figures of ``record`` that moved the wrong way beyond their tolerance
    against ``previous`` (same record name, earlier version): one dict each
    with figure, both values, the change (fraction) and the tolerance."""
    out = []
    for figure, new in record.get("figures", {}).items():
        old = previous.get("figures", {}).get(figure)
        tol = tolerance_for(figure, policy)
        if old is None or tol is None or old == 0:
            continue
        worse = (old - new) if tol.better == "higher" else (new - old)
        if worse > tol.relative * abs(old) and worse > tol.absolute:
            out.append({"record": record["name"], "figure": figure, "previous": old, "measured": new,
                        "previous_version": previous["version"], "change": round((new - old) / abs(old), 4),
                        "tolerance": tol.relative, "better": tol.better})
    return out


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def evaluate(version: str, policy: Policy, root: Path = rec.VALIDATION_DIR,
             tree: ver.TreeHash | None = None, declared: str | None = None) -> GateResult:
    """Judge ``version`` against ``policy`` with the records under ``root``.

    ``tree`` is the descriptor tree the release would ship (default: the
    one on disk); ``declared`` the version ``descriptors/VERSION`` names
    (default: read it).

    Raises:
        RefarchError: ``version`` is not a semantic version; a record is not JSON.
    """
    ver.parse_version(version)
    tree = tree or ver.descriptor_tree_hash()
    declared = declared if declared is not None else ver.architecture_version()
    result = GateResult(version, tree.value)
    if declared != version:
        result.problems.append(f"descriptors/VERSION says {declared}, not {version}: bump it (and the CHANGELOG) "
                               "before validating and tagging")
    found = rec.load_records(version, root)
    for name, rule in policy.records.items():
        record = found.get(name)
        where = root / version / f"{name}.json"
        if record is None:
            result.problems.append(f"{name}: no validation record {where} (run the suite on that profile, then "
                                   "`refarch record`)")
            continue
        if record.get("version") != version:
            result.problems.append(f"{name}: {where} is a record of version {record.get('version')}")
        if (record.get("tree_hash_kind"), record.get("tree_hash")) != (tree.kind, tree.value):
            result.problems.append(f"{name}: record made for descriptor tree {record.get('tree_hash')} "
                                   f"({record.get('tree_hash_kind')}), the descriptors are now {tree.value} "
                                   f"({tree.kind}): validate these descriptors again")
        for check_id in record.get("failed_checks", []):
            msg = (record["checks"].get(check_id, {}).get("outcomes") or [{}])[-1].get("message", "")
            result.problems.append(f"{name}: check {check_id} failed" + (f": {msg.splitlines()[0]}" if msg else ""))
        props = record.get("properties", {})
        for prop_id in rule.must_pass:
            prop = props.get(prop_id)
            if prop is None or prop["verdict"] == "skip":
                result.problems.append(f"{name}: property {prop_id} was not measured (required by the policy)")
                continue
            shown = f"{_fmt(prop['measured'])} {prop['unit']}" if prop.get("measured") is not None else "no figure"
            bounds = ", ".join(f"{k} {v:g}" for k, v in prop["reference"].items() if k in ("lower", "upper"))
            if prop["verdict"] == "warn" and prop_id in policy.may_warn:
                result.warnings.append(f"{name}: property {prop_id} = {shown} warned (accepted by the policy; "
                                       f"{bounds}; run {prop['run_id']})")
            elif prop["verdict"] != "pass":
                result.problems.append(f"{name}: property {prop_id} = {shown} is {prop['verdict']} ({bounds}; run "
                                       f"{prop['run_id']})")
        for prop_id in record.get("failed_properties", []):
            if prop_id not in rule.must_pass:
                result.problems.append(f"{name}: property {prop_id} is {props[prop_id]['verdict']} (run "
                                       f"{props[prop_id]['run_id']})")
        prev_version = previous_version(version, name, root)
        if prev_version is None:
            continue
        result.previous[name] = prev_version
        previous = rec.load_records(prev_version, root)[name]
        for reg in regressions(record, previous, policy):
            result.regressions.append(reg)
            line = (f"{name}: {reg['figure']} regressed from {_fmt(reg['previous'])} ({prev_version}) to "
                    f"{_fmt(reg['measured'])} ({version}): {reg['change']:+.1%}, tolerance "
                    f"{reg['tolerance']:.0%} ({reg['better']} is better)")
            (result.problems if policy.regression.on_regression == "fail" else result.warnings).append(line)
    return result


def write_gate(result: GateResult, root: Path = rec.VALIDATION_DIR) -> Path:
    """``root/<version>/gate.json``: the gate's verdict and what it saw."""
    path = root / result.version / "gate.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result.as_dict(), indent=2) + "\n", encoding="utf-8")
    return path
