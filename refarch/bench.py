"""The suite's own cost per node: a benchmark, not a test.

``python -m refarch.bench scale`` (``ci/bench-scale.sh``) runs the main job
(``tests/integration``) with the scale profile at N = 2, 4, 8 nodes, one
after the other, each in a runs directory of its own, and writes each
phase's seconds per N (the run's ``phases_s``: deploy, configure,
idempotence, check, smoke, properties, teardown) with the fitted growth
per phase (:func:`fit`: seconds per added node, and whether the phase grows
faster than linearly) to ``validation/scale-bench.json`` and its plot to
``validation/scale-bench.svg``.  A run that failed still gives its phases'
seconds; the file says which runs failed and where their results are.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from .paths import ROOT

#: The phases the benchmark reports, in the order a run passes them.
PHASES = ("deploy", "configure", "idempotence", "check", "smoke", "properties", "teardown")

#: Growth from the first to the second half of the node counts at which a
#: phase is "faster than linear": its seconds per added node from the
#: middle N to the largest over those from the smallest to the middle.
SUPERLINEAR_RATIO = 1.5

OUT = ROOT / "validation" / "scale-bench.json"


def fit(points: dict[int, float]) -> dict[str, float | str]:
    """Least-squares line through ``points`` ({N: seconds}, at least two N):
    ``s_per_node`` (slope), ``intercept_s``, and ``growth``: "linear", or
    "faster than linear" when the slope over the upper half of the node
    counts is :data:`SUPERLINEAR_RATIO` times the lower half's (three N or
    more), or "flat" when it does not grow.

    Raises:
        ValueError: fewer than two node counts.
    """
    ns = sorted(points)
    if len(ns) < 2:
        raise ValueError(f"a fit needs two node counts at least, got {ns}")
    mean_n = sum(ns) / len(ns)
    mean_s = sum(points[n] for n in ns) / len(ns)
    slope = sum((n - mean_n) * (points[n] - mean_s) for n in ns) / sum((n - mean_n) ** 2 for n in ns)
    growth = "linear" if slope > 0 else "flat"
    if len(ns) >= 3 and slope > 0:
        mid = ns[len(ns) // 2]
        lower = (points[mid] - points[ns[0]]) / (mid - ns[0])
        upper = (points[ns[-1]] - points[mid]) / (ns[-1] - mid)
        if upper > SUPERLINEAR_RATIO * max(lower, 1e-9):
            growth = "faster than linear"
    return {"s_per_node": round(slope, 2), "intercept_s": round(mean_s - slope * mean_n, 1), "growth": growth}


def fits(runs: dict[int, dict[str, float]]) -> dict[str, dict]:
    """{phase: :func:`fit`} for every phase of :data:`PHASES` that every run has."""
    out = {}
    for phase in PHASES:
        points = {n: phases[phase] for n, phases in runs.items() if phase in phases}
        if len(points) == len(runs) and len(points) >= 2:
            out[phase] = fit(points)
    return out


def _run(n: int, runs_dir: Path, extra: list[str]) -> dict:
    """The main job at ``n`` nodes with the scale profile; its phases."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    sizes = [w for w in (1, 2, 4, 8) if w <= n]
    cmd = [sys.executable, "-m", "pytest", str(ROOT / "tests" / "integration"), "--profile", "scale",
           "--set", f"nodes.count={n}", "--set", f"smoke.world_sizes={sizes}", "-p", "no:cacheprovider", *extra]
    start = time.monotonic()
    rc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "REFARCH_RUNS_DIR": str(runs_dir)},
                        check=False).returncode
    results = sorted(runs_dir.glob("*/results.json"), key=lambda p: p.stat().st_mtime)
    data = json.loads(results[-1].read_text(encoding="utf-8")) if results else {}
    return {"nodes": n, "exit": rc, "seconds": round(time.monotonic() - start, 1),
            "phases_s": {k: v for k, v in (data.get("phases_s") or {}).items() if k in PHASES},
            "checks": data.get("check_counts"), "results": str(results[-1]) if results else None}


def plot(bench: dict, path: Path) -> None:
    """Each phase's seconds against the node count (matplotlib, SVG)."""
    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "none"
    fig, ax = plt.subplots(figsize=(6, 3.6))
    runs = {r["nodes"]: r["phases_s"] for r in bench["runs"]}
    ns = sorted(runs)
    for phase in PHASES:
        if all(phase in runs[n] for n in ns):
            ax.plot(ns, [runs[n][phase] for n in ns], marker="o", label=phase, gid=f"phase-{phase}")
    ax.set_xlabel("nodes")
    ax.set_ylabel("seconds")
    ax.set_xticks(ns)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.savefig(path, format="svg", bbox_inches="tight")
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """``scale [--nodes 2,4,8] [--out FILE] [-- pytest args]``; exit 0 when
    every run gave its phases (a failed run's verdict does not stop the
    benchmark), 1 otherwise."""
    parser = argparse.ArgumentParser(prog="python -m refarch.bench", description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["scale"])
    parser.add_argument("--nodes", default="2,4,8", help="node counts, comma-separated (default 2,4,8)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args(argv)
    try:
        counts = sorted({int(n) for n in args.nodes.split(",")})
    except ValueError:
        parser.error(f"--nodes {args.nodes!r}: not a comma-separated list of node counts")
    if len(counts) < 2 or counts[0] < 1 or counts[-1] > 8:
        parser.error(f"--nodes {args.nodes!r}: give two node counts or more, each 1-8")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    runs = [_run(n, ROOT / "runs" / f"bench-{stamp}" / f"n{n}", args.pytest_args) for n in counts]
    tree = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False)
    bench = {"machine": {"host": platform.node(), "cpus": os.cpu_count(),
                         "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)},
             "tree": tree.stdout.strip(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             "profile": "scale", "runs": runs,
             "fit": fits({r["nodes"]: r["phases_s"] for r in runs if r["phases_s"]})}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(bench, indent=1) + "\n", encoding="utf-8")
    plot(bench, args.out.with_suffix(".svg"))
    print(f"refarch bench: {args.out} and {args.out.with_suffix('.svg')}")
    for phase, f in bench["fit"].items():
        print(f"  {phase:12s} {f['s_per_node']:7.1f} s per added node ({f['growth']})")
    return 0 if all(r["phases_s"] for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
