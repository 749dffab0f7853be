"""The results JSON and the end-of-run summary.

``results.json`` (schema version 1) holds: run id, profile, cloud,
architecture version (``descriptors/VERSION``), the descriptor tree hash
and its kind, the commit, the pins hash, nodes, per-node versions, every check's
outcome, the smoke job's images/sec per world size, the convergence
workload's runs, every non-functional property (id, unit, measured value,
reference, verdict, source, evidence), phase timings in seconds, and the
teardown report.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import version
from ..paths import VERSIONS_FILE
from ..properties import figures

SCHEMA_VERSION = 1
#: Phases in the order a run goes through them (for reports).
PHASE_ORDER = ("image", "wheel", "prepare", "deploy", "configure", "check", "idempotence", "smoke", "properties",
               "availability", "teardown")


def _interval(row: dict, key: str, percent: bool = False) -> str:
    """A scaling row's ``key`` as :meth:`refarch.properties.figures.Figure.text`; the
    median alone for a row without an interval."""
    fig = figures.from_row(row, key)
    if fig is not None:
        return fig.text(percent)
    return f"{100 * row[key]:.1f} %" if percent else f"{row[key]:.1f}"


def ordered_phases(phases: dict[str, float]) -> dict[str, float]:
    """``phases`` in :data:`PHASE_ORDER`, unknown names last."""
    rank = {name: i for i, name in enumerate(PHASE_ORDER)}
    return dict(sorted(phases.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))


def pins_hash() -> str:
    """sha256 (16 hex chars) of ``descriptors/versions.yml``."""
    return hashlib.sha256(VERSIONS_FILE.read_bytes()).hexdigest()[:16]



def strict_json(value):
    """``value`` with every float that is not finite replaced by its name
    ("nan", "inf", "-inf"): JSON has no NaN, and a reader must not take
    one for a number."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value

@dataclass
class Results:
    """Accumulates what a run measured; :meth:`write` saves it as JSON."""

    run_id: str
    profile: str
    cloud: str
    #: The profile values the run changed (``--set``), dotted key -> value.
    overrides: dict = field(default_factory=dict)
    checks: list[dict] = field(default_factory=list)
    node_versions: dict[str, dict[str, str]] = field(default_factory=dict)
    smoke: dict = field(default_factory=dict)
    convergence: dict = field(default_factory=dict)
    #: Restart and elastic runs: {"restart": {...}, "elastic": {...}}.
    availability: dict = field(default_factory=dict)
    #: Per node pair: raw TCP (bytes/s) and allreduce bandwidths per size.
    communication: dict = field(default_factory=dict)
    #: Exposure probes: {kind: {probe, range, open, ssh_methods, dropped, seconds}}.
    exposure: dict = field(default_factory=dict)
    #: One entry per property of the profile, in the order they were judged.
    properties: list[dict] = field(default_factory=list)
    nodes: list[dict] = field(default_factory=list)
    phases_s: dict[str, float] = field(default_factory=dict)
    #: Phases that run as tests (check, smoke): seconds, merged into phases_s.
    test_phases_s: dict[str, float] = field(default_factory=dict)
    teardown: dict | None = None
    errors: list[str] = field(default_factory=list)
    #: Fault cases run (tox -e faults): id -> seconds to inject, check, revert.
    faults: dict[str, float] = field(default_factory=dict)
    #: Where the nodes' logs went when a test failed: {"dir": path, "nodes": {node: [files]}}.
    node_logs: dict = field(default_factory=dict)
    #: Set when a signal stopped the run: {"signal": "SIGTERM", "phase": "smoke"}.
    interrupted: dict | None = None

    def add_check(self, nodeid: str, outcome: str, duration_s: float, message: str = "") -> None:
        """Record one check (a pytest test id) with its outcome."""
        self.checks.append({"id": nodeid, "outcome": outcome, "duration_s": round(duration_s, 2),
                            "message": message[:2000]})

    def add_property(self, prop_id: str, spec, verdict: str, measured: float | None = None,
                     message: str = "", evidence: dict | None = None) -> None:
        """Record one property: ``spec`` is its
        :class:`refarch.profile.PropertySpec`; ``verdict`` is pass, warn,
        fail, skip (the profile's or the cluster's reason in ``message``) or
        error (it could not be measured)."""
        self.properties = [p for p in self.properties if p["id"] != prop_id]
        self.properties.append({
            "id": prop_id, "unit": spec.unit, "measured": measured,
            "reference": spec.reference.model_dump(exclude_none=True), "verdict": verdict,
            "source": spec.source.model_dump(exclude_none=True), "message": message[:2000],
            "evidence": evidence or {},
        })

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for check in self.checks:
            out[check["outcome"]] = out.get(check["outcome"], 0) + 1
        return out

    def as_dict(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "profile": self.profile,
            "cloud": self.cloud,
            "architecture_version": version.architecture_version(),
            **version.descriptor_tree_hash().as_dict(),
            "commit": version.commit(),
            "judge_hash": version.judge_hash(),
            "machine": version.machine(),
            "pins_hash": pins_hash(),
            "overrides": self.overrides,
            "tools": version.tool_versions(),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "nodes": self.nodes,
            "node_versions": self.node_versions,
            "checks": self.checks,
            "check_counts": self.counts(),
            "smoke": self.smoke,
            "convergence": self.convergence,
            "communication": self.communication,
            "availability": self.availability,
            "exposure": self.exposure,
            "properties": self.properties,
            "phases_s": ordered_phases(self.phases_s),
            "teardown": self.teardown,
            "errors": self.errors,
            "faults_s": self.faults,
            "interrupted": self.interrupted,
            "node_logs": self.node_logs,
        }

    def write(self, path: Path) -> Path:
        """Write results.json: strict JSON, so a figure that is not finite
        (NaN, infinity) is written as the string "nan", "inf" or "-inf"."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(strict_json(self.as_dict()), indent=2, sort_keys=False, allow_nan=False),
                        encoding="utf-8")
        return path

    def summary_lines(self) -> list[str]:
        """Human summary: nodes, checks, images/sec, efficiency, phases."""
        lines = [f"run {self.run_id} (profile {self.profile}, cloud {self.cloud})"]
        if self.interrupted:
            lines.append(f"  INTERRUPTED by {self.interrupted['signal']} during the {self.interrupted['phase']} "
                         "phase: the results below are incomplete")
        for node in self.nodes:
            lines.append(f"  node {node['name']:<8} {node['address']}")
        c = self.counts()
        lines.append("  checks: " + ", ".join(f"{v} {k}" for k, v in sorted(c.items())) if c else "  checks: none ran")
        if self.smoke.get("scaling"):
            for row in self.smoke["scaling"]:
                line = f"  batch {row['batch_size']} np={row['world_size']}: {_interval(row, 'images_per_sec')} images/sec"
                if row["world_size"] > 1:
                    line += f", efficiency {_interval(row, 'efficiency', percent=True)}" + (
                        f" (np=1 {row['baseline']['median']:.1f} from the {row['baseline']['source']})"
                        if row.get("baseline") else "")
                lines.append(line)
        else:
            for run in self.smoke.get("runs", []):
                lines.append(f"  np={run['world_size']}: {run['images_per_sec']:.1f} images/sec on "
                             f"{','.join(sorted(set(run['hosts'])))}")
        for pair in self.communication.get("pairs", []):
            if "error" in pair:
                lines.append(f"  {'-'.join(pair['pair'])}: {pair['error']}")
                continue
            sizes = ", ".join(f"{s['bytes'] / (1 << 20):g} MiB {s['busbw_Bps'] / 1e9:.2f}" for s in pair["sizes"])
            lines.append(f"  {'-'.join(pair['pair'])}: TCP {pair['tcp_Bps'] / 1e9:.2f} GB/s; allreduce busbw GB/s: {sizes}")
        for prop in self.properties:
            ref = prop["reference"]
            bounds = ", ".join(f"{k} {ref[k]:g}" for k in ("lower", "upper", "target") if k in ref)
            value = "-" if prop["measured"] is None else f"{prop['measured']:.4g} {prop['unit']}"
            lines.append(f"  property {prop['id']:<32} {value:<16} {prop['verdict'].upper():<5} ({bounds})")
            source = prop["source"].get("text", "") + (f" <{prop['source']['url']}>" if prop["source"].get("url") else "")
            lines.append(f"      source: {source[:150]}")
        if self.phases_s:
            lines.append("  phases (s): " + ", ".join(f"{k} {v:.0f}" for k, v in ordered_phases(self.phases_s).items()))
        if self.node_logs:
            lines.append(f"  node logs (a test failed): {self.node_logs['dir']}/")
        if self.teardown is not None:
            left = self.teardown.get("leaks") or self.teardown.get("state")
            lines.append("  teardown: " + ("LEFT " + json.dumps(left) if left else "nothing left"))
        return lines


def failures(results: dict) -> int:
    """How many checks failed or errored plus how many properties failed or
    errored, in a results.json dict (:meth:`Results.to_dict`)."""
    counts = results.get("check_counts", {})
    bad = counts.get("failed", 0) + counts.get("error", 0)
    return bad + sum(1 for p in results.get("properties", []) if p.get("verdict") in ("fail", "error"))


def verdict(results: dict) -> str:
    """A run's verdict from its results.json dict, the one rule every view
    of a run uses (``refarch list``, the HTML report, the trend, the
    merge-request note): ``INTERRUPTED`` when a signal ended it, else
    ``FAILED`` when a check failed or errored or a property failed or
    errored (:func:`failures`), else ``PASSED``."""
    if results.get("interrupted"):
        return "INTERRUPTED"
    return "FAILED" if failures(results) else "PASSED"

