"""Validation records: what was validated for an architecture version.

``refarch record RUN_DIR...`` turns the results of one or more runs of one
profile (for example the main job and the availability job) into one
record, ``validation/<version>/<name>.json``: version, descriptor tree hash,
pins hash, commit, profile, overrides, run ids, every check and property
(reference, measured value, verdict), the figures a later release is
compared with, tool and package versions, and the date.

Records are committed under ``validation/`` (not only attached to a GitLab
release): the tag pipeline's gate reads them from the tagged tree, and the
next release's gate reads the previous version's records from the same
place, with no artifact expiry and no API token involved.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ..errors import RefarchError
from ..paths import ROOT
from ..run import RunDir

RECORD_SCHEMA = 1
#: Where records live: ``validation/<version>/<name>.json``.
VALIDATION_DIR = ROOT / "validation"
#: Verdicts from best to worst; a merged property or check keeps the worst.
VERDICT_ORDER = ("pass", "warn", "skip", "fail", "error")
OUTCOME_ORDER = ("passed", "skipped", "xfailed", "failed", "error")
#: Phases that build caches (node image, wheelhouse, VM image): not in a
#: record's run time.
BUILD_PHASES = ("image", "wheel", "vm_image")
#: The names of the figures :func:`figures` makes besides the property ids
#: (``images_per_sec`` before its ``[np=N,batch=B]``).
FIGURE_NAMES = ("images_per_sec", "busbw_Bps", "run_time_s")


def load_results(run_dir: Path) -> dict:
    """``run_dir/results.json`` as a dict.

    Raises:
        RefarchError: the file is missing or not JSON.
    """
    path = RunDir.at(run_dir).results_file
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError:
        raise RefarchError(f"{run_dir}: no results.json (is it a run directory? see `refarch list`)") from None
    except ValueError as exc:
        raise RefarchError(f"{path}: not JSON ({exc})") from None


def figures(results: dict) -> dict[str, float]:
    """The figures a release is compared on, from one run's results:
    ``images_per_sec[np=N,batch=B]`` (images/sec: the median of the steps
    in runs with intervals, see :func:`intervals`), every numeric property by
    its id (its own unit), ``busbw_Bps`` (bytes/s: the slowest pair's bus
    bandwidth at the largest message size) and ``run_time_s`` (seconds: the
    sum of the phases but :data:`BUILD_PHASES`: a cold cache is not a slower
    architecture)."""
    out: dict[str, float] = {}
    smoke = results.get("smoke") or {}
    rows = smoke.get("scaling") or smoke.get("runs") or []
    for row in rows:
        if row.get("images_per_sec") is not None:
            out[f"images_per_sec[np={row['world_size']},batch={row.get('batch_size', '?')}]"] = row["images_per_sec"]
    for prop in results.get("properties", []):
        if isinstance(prop.get("measured"), (int, float)) and prop.get("verdict") not in ("skip", "error"):
            out[prop["id"]] = float(prop["measured"])
    largest = [max(pair["sizes"], key=lambda s: s["bytes"]) for pair in (results.get("communication") or {})
               .get("pairs", []) if pair.get("sizes")]
    if largest:
        out["busbw_Bps"] = min(s["busbw_Bps"] for s in largest)
    if results.get("phases_s"):
        out["run_time_s"] = round(sum(v for k, v in results["phases_s"].items() if k not in BUILD_PHASES), 1)
    return out


def intervals(results: dict) -> dict[str, list[float]]:
    """The 95 % intervals ([low, high], refarch.properties.figures) of the figures
    that have one: ``images_per_sec[np=N,batch=B]`` (images/sec) and
    ``scaling.efficiency`` (ratio, the property's world size and batch
    size).  Empty for a run made before figures had intervals."""
    out: dict[str, list[float]] = {}
    for row in (results.get("smoke") or {}).get("scaling") or []:
        if row.get("images_per_sec_ci95"):
            out[f"images_per_sec[np={row['world_size']},batch={row['batch_size']}]"] = row["images_per_sec_ci95"]
    for prop in results.get("properties", []):
        ci = (prop.get("evidence") or {}).get("efficiency_ci95")
        if prop["id"] == "scaling.efficiency" and ci:
            out[prop["id"]] = ci
    return out


def _worst(order: tuple[str, ...], items: list, key=lambda item: item):
    """The item whose ``key`` comes last in ``order`` (unknown values are worst)."""
    rank = {v: i for i, v in enumerate(order)}
    return max(items, key=lambda item: rank.get(key(item), len(order)))


def build_record(runs: list[dict], name: str | None = None) -> dict:
    """One validation record from the results of runs of one profile.

    A property measured by several runs keeps its worst verdict (with each
    run's figure); a property every run skipped is ``skip``. A check that
    ran in several runs keeps its worst outcome. ``verdict`` is ``passed``
    when no check failed or errored and no property failed or errored.

    Raises:
        RefarchError: no runs; runs of different profiles, overrides,
            versions, descriptor trees, judges (:func:`refarch.version.judge_hash`)
            or machines; a run without a tree hash (made before records
            existed) or interrupted.
    """
    if not runs:
        raise RefarchError("record: give at least one run directory")
    first = runs[0]
    for r in runs:
        if not r.get("tree_hash"):
            raise RefarchError(f"record: run {r['run_id']} names no descriptor tree hash "
                               "(results from before validation records; run the suite again)")
        if r.get("interrupted"):
            raise RefarchError(f"record: run {r['run_id']} was interrupted ({r['interrupted'].get('signal')} "
                               f"during {r['interrupted'].get('phase')}): its results are incomplete")
        for key in ("profile", "overrides", "architecture_version", "tree_hash", "pins_hash", "judge_hash", "machine"):
            if r.get(key) != first.get(key):
                raise RefarchError(f"record: runs {first['run_id']} and {r['run_id']} differ in {key} "
                                   f"({first.get(key)!r} vs {r.get(key)!r}): one record is one profile of "
                                   "one descriptor tree")
    if first.get("overrides") and not name:
        raise RefarchError(f"record: runs with overrides ({first['overrides']}) are not the profile "
                           f"{first['profile']!r} itself: name the record with --name (e.g. "
                           f"{first['profile']}-3nodes)")

    properties: dict[str, dict] = {}
    for r in runs:
        for prop in r.get("properties", []):
            entry = properties.setdefault(prop["id"], {"unit": prop["unit"], "reference": prop["reference"],
                                                      "source": prop.get("source", {}), "runs": []})
            entry["runs"].append({"run_id": r["run_id"], "measured": prop["measured"], "verdict": prop["verdict"],
                                  "message": prop.get("message", "")[:500]})
    for entry in properties.values():
        judged = [x for x in entry["runs"] if x["verdict"] != "skip"] or entry["runs"]
        worst = _worst(VERDICT_ORDER, judged, key=lambda x: x["verdict"])
        entry.update(verdict=worst["verdict"], measured=worst["measured"], run_id=worst["run_id"],
                     message=worst["message"])

    checks: dict[str, dict] = {}
    for r in runs:
        for check in r.get("checks", []):
            checks.setdefault(check["id"], {"outcomes": []})["outcomes"].append(
                {"run_id": r["run_id"], "outcome": check["outcome"], "message": check.get("message", "")[:500]})
    for entry in checks.values():
        entry["outcome"] = _worst(OUTCOME_ORDER, [x["outcome"] for x in entry["outcomes"]])

    figs: dict[str, float] = {}
    cis: dict[str, list[float]] = {}
    for r in runs:
        for key, value in figures(r).items():
            figs[key] = value if key != "run_time_s" else round(figs.get(key, 0) + value, 1)
        cis.update(intervals(r))
    bad_checks = sorted(k for k, v in checks.items() if v["outcome"] in ("failed", "error"))
    bad_props = sorted(k for k, v in properties.items() if v["verdict"] in ("fail", "error"))
    packages: dict[str, dict[str, str]] = {}
    for r in runs:
        packages.update(r.get("node_versions") or {})
    return {
        "record_schema": RECORD_SCHEMA,
        "name": name or first["profile"],
        "version": first["architecture_version"],
        "tree_hash": first["tree_hash"],
        "tree_hash_kind": first.get("tree_hash_kind", "git-tree"),
        "pins_hash": first.get("pins_hash"),
        "commit": first.get("commit"),
        "judge_hash": first.get("judge_hash"),
        "machine": first.get("machine") or {},
        "profile": first["profile"],
        "cloud": first.get("cloud"),
        "overrides": first.get("overrides") or {},
        "run_ids": [r["run_id"] for r in runs],
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "verdict": "failed" if bad_checks or bad_props else "passed",
        "failed_checks": bad_checks,
        "failed_properties": bad_props,
        "properties": dict(sorted(properties.items())),
        "checks": dict(sorted(checks.items())),
        "figures": dict(sorted(figs.items())),
        "intervals": dict(sorted(cis.items())),
        "tools": first.get("tools") or {},
        "node_packages": packages,
    }


def record_path(record: dict, root: Path = VALIDATION_DIR) -> Path:
    """``root/<version>/<name>.json``."""
    return root / record["version"] / f"{record['name']}.json"


def write_record(record: dict, root: Path = VALIDATION_DIR) -> Path:
    """Write ``record`` to :func:`record_path` (replacing an older record of
    the same name and version) and return the path."""
    path = record_path(record, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path


#: Files beside a version's records that are not records: the gate's
#: verdict, the side-by-side comparison (refarch compare --out) and the CI
#: environments' passes (refarch ci record, refarch.ci.release).
NOT_RECORDS = ("gate.json", "compare.json", "environments.json")


def load_records(version: str, root: Path = VALIDATION_DIR) -> dict[str, dict]:
    """Record name -> record for ``version`` (``gate.json`` and
    ``compare.json`` excluded).

    Raises:
        RefarchError: a record is not JSON.
    """
    out = {}
    for path in sorted((root / version).glob("*.json")):
        if path.name in NOT_RECORDS:
            continue
        try:
            out[path.stem] = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise RefarchError(f"{path}: not JSON ({exc})") from None
    return out
