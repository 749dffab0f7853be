"""Benchmark file of the main job: how long ``ci/main-job.sh`` took, cold or
warm, next to the phases of the run it made.

``runs/main-job-timings.json`` keeps the newest entries (one per job, newest
last); ``ci/test.sh`` keeps its own per-environment file
(``runs/ci-timings.json``).  Written by ``python -m refarch.report.timings`` from
ci/main-job.sh; never raises for a run that left no results (an interrupted
or refused job is recorded with what is known).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from ..paths import runs_dir
from ..run import RunDir

#: Entries kept in the benchmark file (oldest dropped first).
KEEP = 50

#: A phase that took longer than this (seconds) was built, not taken from a
#: cache: the run was cold for it.
BUILT_S = 1.0


def run_made_since(runs: Path, since_epoch_s: float) -> Path | None:
    """The newest run directory under ``runs`` whose run.json was written at or
    after ``since_epoch_s`` (seconds since the epoch), or None."""
    found = [r.path for r in RunDir.all(runs) if r.meta_file.stat().st_mtime >= since_epoch_s]
    return max(found, key=lambda p: p.stat().st_mtime, default=None)


def entry(started_s: float, bootstrap_end_s: float, finished_s: float, exit_status: int,
          rundir: Path | None) -> dict:
    """One benchmark entry: wall seconds of the whole job and of the bootstrap,
    the exit status, the run id, its phases in seconds (results.json
    ``phases_s``) and ``cold``: the node image or the wheelhouse was built
    (their phase took more than :data:`BUILT_S`)."""
    phases: dict = {}
    run_id = None
    if rundir is not None:
        run_id = rundir.name
        results = RunDir.at(rundir).results_file
        if results.is_file():
            try:
                phases = json.loads(results.read_text(encoding="utf-8")).get("phases_s") or {}
            except (OSError, ValueError):
                phases = {}
    return {
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(finished_s)),
        "host": platform.node(), "cpus": os.cpu_count(),
        "total_s": round(finished_s - started_s, 1), "bootstrap_s": round(bootstrap_end_s - started_s, 1),
        "exit": exit_status, "run_id": run_id,
        "cold": any(phases.get(p, 0) > BUILT_S for p in ("image", "wheel")),
        "phases_s": phases,
    }


def append(path: Path, item: dict, keep: int = KEEP) -> list[dict]:
    """Append ``item`` to the entries in ``path`` (a JSON file with
    ``entries``), keep the newest ``keep``, write it back; returns them."""
    data = {"what": "ci/main-job.sh: wall seconds of each job (bootstrap included), cold or warm, with its "
                    "run's phases", "entries": []}
    if path.is_file():
        try:
            data["entries"] = json.loads(path.read_text(encoding="utf-8")).get("entries", [])
        except (OSError, ValueError):
            pass
    data["entries"] = (data["entries"] + [item])[-keep:]
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return data["entries"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m refarch.report.timings", description=__doc__.splitlines()[0])
    parser.add_argument("--started", type=float, required=True, help="job start, seconds since the epoch")
    parser.add_argument("--bootstrap-end", type=float, required=True)
    parser.add_argument("--exit", type=int, required=True, dest="exit_status")
    args = parser.parse_args(argv)
    runs = runs_dir()
    item = entry(args.started, args.bootstrap_end, time.time(), args.exit_status,
                 run_made_since(runs, args.started))
    append(runs / "main-job-timings.json", item)
    kind = "cold" if item["cold"] else "warm"
    print(f"ci/main-job.sh: {item['total_s']:.0f} s ({kind}; bootstrap {item['bootstrap_s']:.0f} s), "
          f"written to {runs / 'main-job-timings.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
