"""The release gate: may this architecture version be released?

``refarch gate VERSION`` reads the release criteria (:mod:`refarch.judge.criteria`)
and the validation records of ``VERSION`` (:mod:`refarch.judge.records`). It
passes only when

- ``VERSION`` is what ``descriptors/VERSION`` says,
- every record the release criteria require exists, was made for exactly the
  descriptor tree on disk (tree hash), and has no failed or errored check,
- every property the release criteria require of that record passed (or warned,
  where the release criteria let it warn),

and compares each figure with the previous version's record of the same
name (images/sec per world size, efficiency, bus bandwidth, recovery time,
run time), with a tolerance per figure kept in the release criteria; a regression
fails the gate or only warns, as the release criteria say. A passing gate writes
``validation/<VERSION>/gate.json``.

A release compares or fails: every figure the suite makes has a tolerance
or a stated reason it is judged by its own bounds only (checked when the
criteria load); a figure the previous release had and this one lacks is a
problem; records of two machines need a side-by-side comparison
(``compare.json``) whose candidate is the release's own descriptor tree,
and an inconclusive figure there fails unless the criteria accept it by
name.  A merge request's gate (``--merge-request``) only warns about the
comparison.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import properties
from .. import version as ver
from ..errors import ProfileError, RefarchError
from ..profile import load_profile
from . import records as rec
from .criteria import ReleaseCriteria, Tolerance


@dataclass
class GateResult:
    """The gate's verdict: ``problems`` fail it; ``warnings`` (accepted
    warns, regressions the release criteria only warn about) do not."""

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


def tolerance_for(figure: str, criteria: ReleaseCriteria) -> Tolerance | None:
    """The tolerance of ``figure`` by its full name, else by its name
    before ``[`` (``images_per_sec[np=2,batch=16]`` -> ``images_per_sec``)."""
    tols = criteria.regression.tolerances
    return tols.get(figure) or tols.get(figure.split("[", 1)[0])


def regressions(record: dict, previous: dict, criteria: ReleaseCriteria) -> list[dict]:
    """Figures of ``record`` that moved the wrong way beyond their tolerance
    against ``previous`` (same record name, earlier version): one dict each
    with figure, both values, the change (fraction) and the tolerance."""
    out = []
    for figure, new in record.get("figures", {}).items():
        old = previous.get("figures", {}).get(figure)
        tol = tolerance_for(figure, criteria)
        if old is None or tol is None or old == 0:
            continue
        worse = (old - new) if tol.better == "higher" else (new - old)
        if worse > tol.relative * abs(old) and worse > tol.absolute:
            out.append({"record": record["name"], "figure": figure, "previous": old, "measured": new,
                        "previous_version": previous["version"], "change": round((new - old) / abs(old), 4),
                        "tolerance": tol.relative, "better": tol.better})
    return out


def lost_figures(record: dict, previous: dict, criteria: ReleaseCriteria) -> list[str]:
    """Figures ``previous`` had that ``record`` lacks (those the criteria
    do not compare left out): a measurement that stopped is never a pass."""
    nc = criteria.regression.not_compared
    return sorted(f for f in previous.get("figures", {}) if f not in record.get("figures", {})
                  and f not in nc and f.split("[", 1)[0] not in nc)


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def rejudge(record: dict, declared: dict | None = None) -> tuple[dict, list[str]]:
    """The record's properties judged again against the references of its
    profile in this tree, with the record's overrides of other settings
    and the reference overrides the release criteria ``declared`` for this record
    (:attr:`RecordRule.references`), and the reasons it cannot stand as
    that profile.

    Returns (property id -> property, the re-judged ones with ``verdict``,
    ``message`` and ``recorded_verdict``; problems: each override of a
    reference, naming it, and a profile that no longer loads).  Verdicts
    without a figure to judge (skip, error) stay as recorded.
    """
    overrides, declared = record.get("overrides") or {}, declared or {}
    problems = [f"made with an overridden reference ({key}={value}) the release criteria do not declare for it: it cannot "
                f"stand as profile {record.get('profile')}" for key, value in sorted(overrides.items())
                if key.startswith("properties.") and declared.get(key) != value]
    props = dict(record.get("properties") or {})
    try:
        profile = load_profile(record.get("profile", "?"),
                               {**{k: v for k, v in overrides.items() if not k.startswith("properties.")}, **declared})
    except ProfileError as exc:
        return props, [*problems, f"its profile cannot be judged again: {exc}"]
    specs = profile.property_specs()
    for prop_id, prop in props.items():
        spec = specs.get(prop_id)
        if spec is None or prop.get("verdict") in ("skip", "error") or not properties.is_finite_number(
                prop.get("measured")):
            continue
        verdict = properties.judge(prop_id, prop["measured"], spec)
        if verdict.status != prop["verdict"]:
            props[prop_id] = {**prop, "verdict": verdict.status, "recorded_verdict": prop["verdict"],
                              "message": f"{verdict.message} (judged again against profile {profile.name} in this "
                                         f"tree; recorded as {prop['verdict']})"}
    return props, problems


def load_comparison(version: str, root: Path = rec.VALIDATION_DIR) -> dict | None:
    """``root/<version>/compare.json`` (refarch compare: this version
    against the previous one, side by side), or None.

    Raises:
        RefarchError: the file is not JSON.
    """
    path = root / version / "compare.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise RefarchError(f"{path}: not JSON ({exc})") from None


def _machine_text(record: dict) -> str:
    m = record.get("machine") or {}
    if not m:
        return "no machine description (recorded before records carried one)"
    return f"{m.get('cpu_model')}, {m.get('cores')} cores, {m.get('memory_bytes', 0) / 2 ** 30:.0f} GiB, " \
           f"kernel {m.get('kernel')}"


def evaluate(version: str, criteria: ReleaseCriteria, root: Path = rec.VALIDATION_DIR,
             tree: ver.TreeHash | None = None, declared: str | None = None,
             judge: str | None = None, environments: Callable[[str, Path], list[str]] | None = None,
             release: bool = True) -> GateResult:
    """Judge ``version`` against ``criteria`` with the records under ``root``.

    ``tree`` is the descriptor tree the release would ship (default: the
    one on disk); ``declared`` the version ``descriptors/VERSION`` names
    (default: read it); ``judge`` the hash of what judges in this tree
    (default: :func:`refarch.version.judge_hash`).  ``environments``, when
    given, is called with ``version`` and ``root`` and returns the problems
    of the suite's CI: the CLI passes one by which every CI environment of
    both tiers must have passed on this tree's exact key
    (:func:`refarch.ci.release.problems`, ``environments.json`` beside the
    records); the gate itself knows nothing of the CI.  Every record's
    properties are judged again against its profile in this tree
    (:func:`rejudge`).  Figures are compared with the previous version's
    record only when both come from the same machine; otherwise the gate
    reads the side-by-side comparison (:func:`load_comparison`), which must
    have measured this ``tree`` as its candidate.  With ``release`` false (a
    merge request's preview) a missing, other-tree or inconclusive
    comparison only warns.

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
    judge = judge if judge is not None else ver.judge_hash()
    if environments is not None:
        result.problems += environments(version, root)
    found = rec.load_records(version, root)
    comparison = load_comparison(version, root)
    for name, rule in criteria.records.items():
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
        if record.get("judge_hash") != judge:
            made = (f"judge {str(record['judge_hash'])[:12]}, suite commit {record.get('commit')}"
                    if record.get("judge_hash") else "no judge hash: made before records carried one")
            (result.problems if criteria.on_other_judge == "fail" else result.warnings).append(
                f"{name}: record made by another judge ({made}); this tree judges with {judge[:12]} (the suite, "
                "its checks, the profiles or the release criteria changed since): validate again to be judged by this tree")
        for check_id in record.get("failed_checks", []):
            msg = (record["checks"].get(check_id, {}).get("outcomes") or [{}])[-1].get("message", "")
            result.problems.append(f"{name}: check {check_id} failed" + (f": {msg.splitlines()[0]}" if msg else ""))
        props, refused = rejudge(record, rule.references)
        result.problems += [f"{name}: record {where}: {why}" for why in refused]
        for prop_id in rule.must_pass:
            prop = props.get(prop_id)
            if prop is None or prop["verdict"] == "skip":
                result.problems.append(f"{name}: property {prop_id} was not measured (required by the release criteria)")
                continue
            shown = f"{_fmt(prop['measured'])} {prop['unit']}" if prop.get("measured") is not None else "no figure"
            bounds = ", ".join(f"{k} {v:g}" for k, v in prop["reference"].items() if k in ("lower", "upper"))
            if prop["verdict"] == "warn" and prop_id in criteria.may_warn:
                result.warnings.append(f"{name}: property {prop_id} = {shown} warned (accepted by the release criteria; "
                                       f"{bounds}; run {prop['run_id']})")
            elif prop["verdict"] != "pass":
                result.problems.append(f"{name}: property {prop_id} = {shown} is {prop['verdict']} ({bounds}; run "
                                       f"{prop['run_id']})" + (f": {prop['message']}" if prop.get("recorded_verdict")
                                                               else ""))
        for prop_id, prop in sorted(props.items()):
            if prop_id not in rule.must_pass and prop["verdict"] in ("fail", "error"):
                result.problems.append(f"{name}: property {prop_id} is {prop['verdict']} (run {prop['run_id']})"
                                       + (f": {prop['message']}" if prop.get("recorded_verdict") else ""))
        prev_version = previous_version(version, name, root)
        if prev_version is None:
            continue
        result.previous[name] = prev_version
        previous = rec.load_records(prev_version, root)[name]
        result.problems += [f"{name}: figure {f} was measured in {prev_version} and is missing from this record: "
                            "not compared (a measurement that stopped)" for f in lost_figures(record, previous, criteria)]
        if not record.get("machine") or record.get("machine") != previous.get("machine"):
            _compared(name, record, previous, prev_version, comparison, criteria, result, tree, release)
            continue
        for reg in regressions(record, previous, criteria):
            result.regressions.append(reg)
            line = (f"{name}: {reg['figure']} regressed from {_fmt(reg['previous'])} ({prev_version}) to "
                    f"{_fmt(reg['measured'])} ({version}): {reg['change']:+.1%}, tolerance "
                    f"{reg['tolerance']:.0%} ({reg['better']} is better)")
            (result.problems if criteria.regression.on_regression == "fail" else result.warnings).append(line)
    return result


def _compared(name: str, record: dict, previous: dict, prev_version: str, comparison: dict | None,
              criteria: ReleaseCriteria, result: GateResult, tree: ver.TreeHash, release: bool) -> None:
    """Records of two machines: the side-by-side comparison decides; a
    release fails without one of this tree, a merge request warns."""
    where = result.problems if release else result.warnings
    why = (f"{name}: figures of {prev_version} ({_machine_text(previous)}) and {result.version} "
           f"({_machine_text(record)}) come from different machines and are not compared one by one")
    if comparison is None or comparison.get("baseline_version") != prev_version:
        where.append(f"{why}; no side-by-side comparison with {prev_version} "
                     f"(validation/{result.version}/compare.json: `refarch compare v{prev_version}`)")
        return
    measured = (comparison.get("candidate_tree_hash_kind"), comparison.get("candidate_tree_hash"))
    if measured != (tree.kind, tree.value):
        where.append(f"{why}; the side-by-side comparison measured descriptor tree {measured[1] or 'unknown'} as "
                     f"its candidate, the release ships {tree.value}: compare again (`refarch compare "
                     f"v{prev_version}`)")
        return
    accepted = set(criteria.regression.accept_inconclusive)
    for fig in comparison.get("figures", []):
        if fig["verdict"] in ("missing", "no tolerance"):
            where.append(f"{name}: side by side against {prev_version}: {fig['message']}")
            continue
        text = (f"{name}: {fig['figure']} candidate/baseline {fig['ratio']:.3f} (95 % interval "
                f"{fig['ci95'][0]:.3f}-{fig['ci95'][1]:.3f}) against {prev_version}, side by side: {fig['verdict']}")
        if fig["verdict"] == "regression":
            result.regressions.append({"record": name, "figure": fig["figure"], "previous_version": prev_version,
                                       "ratio": fig["ratio"], "ci95": fig["ci95"], "side_by_side": True})
            (result.problems if criteria.regression.on_regression == "fail" else result.warnings).append(text)
        elif fig["verdict"] == "inconclusive":
            if fig["figure"] in accepted or fig["figure"].split("[", 1)[0] in accepted:
                result.warnings.append(f"{text} (accepted by the release criteria)")
            else:
                where.append(f"{text}: not accepted by the release criteria (regression.accept_inconclusive); "
                             "compare with more repetitions")


def write_gate(result: GateResult, root: Path = rec.VALIDATION_DIR) -> Path:
    """``root/<version>/gate.json``: the gate's verdict and what it saw."""
    path = root / result.version / "gate.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result.as_dict(), indent=2) + "\n", encoding="utf-8")
    return path
