"""The HTML report of a run: one self-contained file, ``runs/<id>/report.html``.

Rendered with Jinja2 from the run's ``results.json``: verdict, run id,
profile and architecture version; nodes with addresses and versions; a node
x check matrix; every property with reference, measured value, verdict and
source; the scaling plot (images/sec against world size with the ideal
linear line, matplotlib, inline SVG); the communication figures; phase
timings as bars.  :func:`render_trend` makes ``runs/trend.html`` from every
run's results and every validation record: images/sec and efficiency per
run and per architecture version, to spot a drift.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import jinja2

from ..errors import RefarchError
from ..judge.results import verdict
from ..run import RunDir

TEMPLATES = Path(__file__).parent / "templates"


def _env() -> jinja2.Environment:
    # Optional keys of results.json (a run without node logs, a pair
    # without an error) render as empty: the default Undefined.
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True)


def check_matrix(results: dict, proven: dict[str, list[str]] | None = None) -> tuple[list[str], list[dict]]:
    """(columns, rows): columns are the node names plus "cluster"; each row
    is a check name with {column: outcome} ("passed", "failed", "error",
    "skipped") from the test ids (``test_x[node2]`` is node2's cell,
    ``test_y`` the cluster's), and ``proven_by``: the live fault cases that
    fail it, or why none can (``proven``, default
    :func:`refarch.faults.coverage.matrix`)."""
    from ..faults import coverage

    proven = coverage.matrix() if proven is None else proven
    nodes = [n["name"] for n in results.get("nodes", [])]
    rows: dict[str, dict] = {}
    for check in results.get("checks", []):
        name = check["id"].split("::")[-1]
        if name.startswith("test_property["):
            continue
        m = re.fullmatch(r"(\w+)\[(.+)\]", name)
        test, param = (m.group(1), m.group(2)) if m else (name, "cluster")
        column = param if param in nodes else "cluster"
        rows.setdefault(test, {"check": test, "cells": {}, "messages": [], "proven_by": proven.get(test, [])})
        rows[test]["cells"][column] = check["outcome"]
        if check.get("message") and check["outcome"] in ("failed", "error"):
            rows[test]["messages"].append(check["message"][:300])
    return nodes + ["cluster"], list(rows.values())


def _inline_svg(fig, element_id: str) -> str:
    """A matplotlib figure as an inline ``<svg id=element_id>`` (the figure is closed)."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg"):].replace("<svg", f'<svg id="{element_id}" role="img"', 1)


def scaling_svg(results: dict) -> str:
    """The scaling plot as inline SVG: images/sec per world size for each
    batch size (medians with their 95 % intervals as error bars), and the
    ideal line (world size x images/sec at np=1); with the profile's
    ``smoke.reference_curve``, that published curve on a right-hand axis of
    its own, labelled with its source.  Empty when the run has no scaling
    table."""
    table = results.get("smoke", {}).get("scaling") or []
    if not table:
        return ""
    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "none"  # labels stay text a reader (and a test) can find
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for batch in sorted({row["batch_size"] for row in table}):
        rows = sorted((r for r in table if r["batch_size"] == batch), key=lambda r: r["world_size"])
        sizes = [r["world_size"] for r in rows]
        measured = [r["images_per_sec"] for r in rows]
        single = next((r["images_per_sec"] for r in rows if r["world_size"] == 1), measured[0])
        # Error bars: each median's 95 % interval (rows of older runs have none).
        ci = [r.get("images_per_sec_ci95") or [r["images_per_sec"]] * 2 for r in rows]
        yerr = [[m - c[0] for m, c in zip(measured, ci, strict=True)], [c[1] - m for m, c in zip(measured, ci, strict=True)]]
        line = ax.plot(sizes, measured, marker="o", label=f"measured, batch {batch} (median, 95 % interval)",
                       gid=f"measured-b{batch}")[0]
        ax.errorbar(sizes, measured, yerr=yerr, fmt="none", capsize=3, ecolor=line.get_color(),
                    gid=f"interval-b{batch}")
        ax.plot(sizes, [w * single for w in sizes], linestyle="--", label=f"ideal (linear), batch {batch}",
                gid=f"ideal-b{batch}")
    ax.set_xlabel("world size (ranks, one per node)")
    ax.set_ylabel("images/sec")
    ax.set_xticks(sorted({r["world_size"] for r in table}))
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    reference = (results["smoke"].get("config") or {}).get("reference_curve")
    if reference:
        # Other hardware: its own axis, so both curves' shapes show.
        points = sorted((int(w), float(v)) for w, v in reference["images_per_sec"].items())
        ref_ax = ax.twinx()
        ref_ax.plot([w for w, _ in points], [v for _, v in points], color="grey", marker="s", linestyle=":",
                    label="reference (right axis): " + reference["source"][:90], gid="reference-curve")
        ref_ax.set_ylabel("reference images/sec")
        more_handles, more_labels = ref_ax.get_legend_handles_labels()
        handles, labels = handles + more_handles, labels + more_labels
    ax.legend(handles, labels, fontsize=7)
    return _inline_svg(fig, "scaling-plot")


def render(results_file: Path, out: Path | None = None) -> Path:
    """Write the report of the run whose ``results.json`` is
    ``results_file`` (default: ``report.html`` beside it); returns its path.

    Raises:
        FileNotFoundError: no such results file.
    """
    results = json.loads(Path(results_file).read_text(encoding="utf-8"))
    out = out or Path(results_file).with_name(RunDir.REPORT)
    from ..faults import coverage

    proven = coverage.matrix()
    columns, rows = check_matrix(results, proven)
    phases = results.get("phases_s", {})
    html = _env().get_template("report.html.j2").render(
        r=results, verdict=verdict(results), columns=columns, rows=rows, scaling_svg=scaling_svg(results),
        proven=proven,
        phases=phases, phase_max=max(phases.values(), default=1) or 1,
        elastic=[(k, v) for k, v in sorted((results.get("availability") or {}).items()) if k.startswith("elastic")])
    out.write_text(html, encoding="utf-8")
    return out


def record_rows(root: Path) -> list[dict]:
    """One row per validation record under ``root`` (``<version>/<name>.json``),
    oldest version first: version, record name, date, verdict, images/sec
    per world size (first batch size), scaling efficiency, bus bandwidth
    (GB/s), recovery time (s) and the descriptor tree hash."""
    from ..judge.records import NOT_RECORDS
    from ..version import parse_version

    rows = []
    for path in root.glob("*/*.json"):
        if path.name in NOT_RECORDS:
            continue
        try:
            key = parse_version(path.parent.name)
            rec = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RefarchError):
            continue
        figs = rec.get("figures", {})
        ips: dict[str, float] = {}
        for name, value in sorted(figs.items()):
            m = re.fullmatch(r"images_per_sec\[np=(\d+),batch=(\w+)\]", name)
            if m:
                ips.setdefault(m.group(1), value)
        rows.append({"_key": (key, path.stem), "version": rec.get("version"), "name": rec.get("name"),
                     "date": rec.get("date", ""), "verdict": rec.get("verdict", "?").upper(), "ips": ips,
                     "efficiency": figs.get("scaling.efficiency"), "busbw_GBps": figs["busbw_Bps"] / 1e9
                     if "busbw_Bps" in figs else None, "recovery_s": figs.get("availability.recovery_s"),
                     "tree": (rec.get("tree_hash") or "")[:12]})
    return sorted(rows, key=lambda r: r["_key"])


def render_trend(runs: Path, out: Path | None = None, records: Path | None = None) -> Path:
    """``runs/trend.html``: for every run under ``runs`` with results, oldest
    first: finish time, profile, verdict, images/sec per world size and the
    scaling efficiency property; then the validation records (``records``,
    default ``validation/``) per architecture version, oldest first; then
    every side-by-side comparison (:func:`comparisons`) with its verdict
    table and both sides' distributions per figure."""
    from ..judge.records import VALIDATION_DIR

    rows = []
    for rundir in RunDir.all(runs, having=RunDir.RESULTS):
        data, path = rundir.read_results(), rundir.results_file
        if data is None:
            continue
        eff = next((p["measured"] for p in data.get("properties", []) if p["id"] == "scaling.efficiency"), None)
        ips = {str(r["world_size"]): r["images_per_sec"] for r in data.get("smoke", {}).get("runs", [])}
        rows.append({"run_id": data.get("run_id", path.parent.name), "finished": data.get("finished_at", ""),
                     "profile": data.get("profile", "?"), "verdict": verdict(data), "ips": ips, "efficiency": eff})
    rows.sort(key=lambda r: r["finished"])
    validated = record_rows(records if records is not None else VALIDATION_DIR)
    sizes = sorted({w for r in rows + validated for w in r["ips"]}, key=int)
    out = out or runs / "trend.html"
    compared = comparisons(runs, records if records is not None else VALIDATION_DIR)
    for item in compared:
        item["svg"] = comparison_svg(item["c"], f"comparison-plot{item['cid']}")
    out.write_text(_env().get_template("trend.html.j2").render(rows=rows, sizes=sizes, records=validated,
                                                               comparisons=compared), encoding="utf-8")
    return out


def comparison_svg(comparison: dict, element_id: str = "comparison-plot") -> str:
    """Both sides' figures of a comparison (refarch.cli.compare), one panel
    per figure: every repetition as a point, each side's median as a bar,
    as inline SVG (``<svg id=element_id>``); empty without figures."""
    # A missing or untolerated figure has no sides to draw (its row says why).
    figs = [f for f in comparison.get("figures") or [] if "ratio" in f]
    if not figs:
        return ""
    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "none"
    fig, axes = plt.subplots(1, len(figs), figsize=(2.6 * len(figs), 3.2), squeeze=False)
    for ax, f in zip(axes[0], figs, strict=True):
        for x, side in enumerate(("baseline", "candidate")):
            values = f[side]
            ax.scatter([x] * len(values), values, alpha=0.7, label=side)
            ax.hlines(f[f"{side}_median"], x - 0.25, x + 0.25, colors="black")
        ax.set_xticks([0, 1], ["baseline", "candidate"])
        ax.set_title(f"{f['figure']}\n{f['verdict']}", fontsize=8)
        ax.grid(alpha=0.3)
    return _inline_svg(fig, element_id)


def render_comparison(compare_file: Path, out: Path | None = None) -> Path:
    """``compare.html`` beside ``compare_file`` (refarch compare): the
    verdict table and both sides' distributions per figure; returns its
    path.

    Raises:
        FileNotFoundError: no such file.
    """
    comparison = json.loads(Path(compare_file).read_text(encoding="utf-8"))
    out = out or Path(compare_file).with_name("compare.html")
    out.write_text(_env().get_template("compare.html.j2").render(c=comparison, svg=comparison_svg(comparison),
                                                                 cid=""), encoding="utf-8")
    return out


def comparisons(runs: Path, records: Path) -> list[dict]:
    """Every side-by-side comparison to show in the trend report: each
    release's ``records/<version>/compare.json`` (the gate's), then each
    ``runs/compare-*/compare.json``, oldest first by their folder's name;
    one that does not parse is left out.  Each item: ``where`` (the file,
    relative to its root), ``c`` (the comparison) and ``cid`` (a suffix
    for its element ids)."""
    files = [(records, f) for f in sorted(records.glob("*/compare.json"))]
    files += [(runs, f) for f in sorted(runs.glob("compare-*/compare.json"))]
    out = []
    for root, path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        out.append({"where": f"{root.name}/{path.relative_to(root)}", "c": data, "cid": f"-{len(out) + 1}"})
    return out
