"""``refarch compare BASELINE [CANDIDATE]``: two descriptor trees measured
side by side on this machine (the statistics: refarch.judge.comparison):
images/sec per world size, efficiency, bus bandwidth and the recovery and
rejoin times of an elastic job that loses a stopped node.

Both trees are deployed as kept clusters at once, each by a child ``python
-m refarch up`` that reads that tree's descriptors (``REFARCH_DESCRIPTORS``:
profile, Terraform, Ansible, pins); this suite measures both.  Then, n
times, the benchmark jobs, the allreduce bus bandwidth and the stop-mode
availability properties (``--long-properties``) run on one cluster and
then the other (the order alternates each repetition, so
neither side always runs first).  Where memory holds one cluster only,
the baseline is deployed, measured n times and torn down, then the
candidate (``arrangement`` "one after the other" in compare.json: the
machine's drift between the halves is not cancelled); each repetition a
child ``pytest
--run-id`` whose ``results.json`` gives the figures
(refarch.judge.records.figures).  Both clusters are deployed with
``smoke.baseline_rounds=0``: the same instrument on both sides, whatever
the older tree's benchmark accepts.  ``compare.json`` (in the comparison's
folder under runs/, and with ``--out`` where the gate reads it) holds every
repetition's figures, each figure's ratio with its interval and verdict;
``compare.html`` beside it shows the table and both distributions.
Both clusters are torn down at the end, on failure and on SIGINT/SIGTERM;
an interrupted comparison writes no verdict.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .. import childrun
from .. import version as ver
from ..clouds.drivers import DRIVERS
from ..errors import RefarchError
from ..judge import comparison, records
from ..lifecycle import guarded
from ..paths import DESCRIPTORS, ROOT, runs_dir
from ..profile import load_profile
from ..report import html as report

#: The tests one repetition runs: the scaling table (images/sec at every
#: world size), the efficiency property, the bus bandwidth property, and
#: the recovery and rejoin times of an elastic job losing a stopped node
#: (one elastic job gives both; the stop is proven before anything is
#: timed, refarch.availability).
SELECTION = ("test_scaling_table or efficiency or busbw_to_tcp or availability.recovery_s or "
             "availability.rejoin_s")
#: pytest options of a repetition: the availability properties stop a node.
EXTRA_ARGS = ("--long-properties",)
#: The working tree (uncommitted changes included) as a side.
WORKTREE = "worktree"


@dataclass
class Side:
    """One side of a comparison: ``label`` (baseline or candidate), the git
    ``ref`` (or :data:`WORKTREE`), its ``descriptors`` folder, its
    architecture ``version``, and the kept cluster's ``run_id``."""

    label: str
    ref: str
    descriptors: Path
    version: str
    run_id: str = ""

    def env(self) -> dict:
        return {**os.environ, "REFARCH_DESCRIPTORS": str(self.descriptors)}


def previous_tag(root: Path = ROOT) -> str:
    """The highest ``v<semver>`` tag below descriptors/VERSION.

    Raises:
        RefarchError: no such tag.
    """
    current = ver.parse_version(ver.architecture_version())
    tags = []
    try:
        listed = ver.git("tag", "--list", "v*", cwd=root).split()
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        listed = []
    for tag in listed:
        try:
            key = ver.parse_version(tag[1:])
        except RefarchError:
            continue
        if key < current:
            tags.append((key, tag))
    if not tags:
        raise RefarchError(f"compare: no release tag below {ver.architecture_version()} (v<MAJOR.MINOR.PATCH>): "
                           "name the baseline, e.g. `refarch compare HEAD~3`")
    return max(tags)[1]


def resolve(ref: str, root: Path = ROOT) -> str:
    """The commit ``ref`` names.

    Raises:
        RefarchError: no such commit, or no descriptors/VERSION in it.
    """
    try:
        commit = ver.git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", cwd=root)
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        raise RefarchError(f"compare: {ref!r} names no commit in {root} (git rev-parse)") from None
    try:
        ver.git("cat-file", "-e", f"{commit}:descriptors/VERSION", cwd=root)
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        raise RefarchError(f"compare: {ref} ({commit[:12]}) has no descriptors/VERSION: not an architecture "
                           "version to compare") from None
    return commit


def extract(commit: str, into: Path, root: Path = ROOT) -> Path:
    """``descriptors/`` of ``commit`` written under ``into`` (git archive);
    its path."""
    into.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as tar:
        subprocess.run(["git", "archive", "--format=tar", commit, "descriptors"], cwd=root, stdout=tar,
                       check=True, timeout=120)
        tar.seek(0)
        with tarfile.open(fileobj=tar) as archive:
            # Python before 3.11.4 (Debian 12's 3.11.2) has no extraction filters; the archive is git's own.
            archive.extractall(into, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    return into / "descriptors"


def memory_available() -> int:
    """MemAvailable of /proc/meminfo in bytes (0 when unreadable)."""
    return ver.meminfo("MemAvailable")


#: How the two clusters are measured: both kept at once and measured
#: interleaved, or (memory for one cluster only) the baseline's
#: repetitions, its teardown, then the candidate's.
SIDE_BY_SIDE = "side by side"
ONE_AFTER_THE_OTHER = "one after the other"


def preflight(baseline: str, candidate: str, repetitions: int, profile: str, overrides: dict,
              root: Path = ROOT) -> tuple[str, str | None, str]:
    """Everything checked before anything is deployed: n, both refs, the
    profile, and memory (the profile's nodes x flavor memory, against
    MemAvailable): for two clusters at once, the comparison is
    :data:`SIDE_BY_SIDE`; for one only, :data:`ONE_AFTER_THE_OTHER` (said
    on stderr: the machine's drift between the two halves is not
    cancelled).  Returns the baseline's commit, the candidate's (None for
    the working tree) and the arrangement.

    Raises:
        RefarchError: one line naming the problem (also: memory for not
            even one cluster).
    """
    if repetitions < comparison.MIN_REPETITIONS:
        raise RefarchError(f"compare: -n {repetitions}: at least {comparison.MIN_REPETITIONS} repetitions are "
                           "needed for an interval")
    base = resolve(baseline, root)
    cand = None if candidate == WORKTREE else resolve(candidate, root)
    prof = load_profile(profile, overrides)
    if not DRIVERS[prof.cloud].on_this_machine:
        raise RefarchError(f"compare: profile {profile} is on cloud {prof.cloud}; side-by-side comparison deploys "
                           "both clusters on this machine's local cloud")
    one = prof.nodes.count * prof.nodes.flavor.memory_mb * 2 ** 20
    have = memory_available()
    if one > have:
        raise RefarchError(f"compare: one cluster of {prof.nodes.count} nodes with "
                           f"{prof.nodes.flavor.memory_mb} MiB each needs {one / 2 ** 30:.1f} GiB, "
                           f"{have / 2 ** 30:.1f} GiB are available: give less memory per node "
                           "(--set nodes.flavor.memory_mb=4096) or free some")
    if 2 * one > have:
        print(f"refarch compare: two clusters of {prof.nodes.count} nodes with {prof.nodes.flavor.memory_mb} MiB "
              f"each need {2 * one / 2 ** 30:.1f} GiB, {have / 2 ** 30:.1f} GiB are available: the baseline is "
              "measured first, then the candidate (the machine's drift between the two is not cancelled; "
              "--set nodes.flavor.memory_mb=4096 keeps both at once)", file=sys.stderr, flush=True)
        return base, cand, ONE_AFTER_THE_OTHER
    return base, cand, SIDE_BY_SIDE


def _up(side: Side, profile: str, overrides: dict, log: Path) -> str:
    sets = [a for k, v in {**overrides, "smoke.baseline_rounds": 0}.items() for a in ("--set", f"{k}={v}")]
    with open(log, "w", encoding="utf-8") as out:
        r = subprocess.run([sys.executable, "-m", "refarch", "up", "--profile", profile, *sets], cwd=ROOT,
                           env=side.env(), stdout=out, stderr=subprocess.STDOUT, text=True, check=False)
    text = log.read_text(encoding="utf-8")
    found = re.search(r"^run id: (\S+)", text, re.M)
    if found:
        side.run_id = found.group(1)
    if r.returncode != 0:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        raise RefarchError(f"compare: the {side.label} ({side.ref}) did not deploy: "
                           f"{lines[-1] if lines else 'no output'} (full output: {log})")
    return side.run_id


def _down(side: Side, log: Path) -> None:
    if not side.run_id:
        return
    with open(log, "a", encoding="utf-8") as out:
        subprocess.run([sys.executable, "-m", "refarch", "destroy", side.run_id], cwd=ROOT, env=side.env(),
                       stdout=out, stderr=subprocess.STDOUT, check=False, timeout=900)


def _measured_out_of_bounds(name: str, results: dict) -> bool:
    """True when test ``name`` is a property test whose property was
    measured (a finite figure) and only judged outside the profile's
    reference (verdict fail): the figure stands for the comparison, which
    asks how the two versions differ, not whether each meets the profile
    (an older release may not).  A property that was not measured (verdict
    error: the event never happened, the figure is missing or not finite)
    is no figure."""
    from ..faults.base import property_id

    wanted = property_id(name.rsplit("::", 1)[-1])
    if not wanted:
        return False
    for prop in results.get("properties", []):
        if prop.get("id") == wanted:
            return prop.get("verdict") == "fail" and isinstance(prop.get("measured"), (int, float))
    return False


def measure(side: Side, junit: Path) -> dict[str, float]:
    """One repetition on ``side``'s cluster: the figures of its
    results.json (refarch.judge.records.figures) after the selected tests
    (:data:`SELECTION`): images/sec per world size, efficiency (ratio),
    busbw (bytes/s and its ratio to TCP), recovery and rejoin times
    (seconds).  A property measured but outside the profile's reference
    still gives its figure, said on stderr.

    Raises:
        RefarchError: a test failed otherwise (its message), or no results.
    """
    outcomes = childrun.run_checks(side.run_id, SELECTION, junit, extra_args=EXTRA_ARGS, env=side.env(),
                                   timeout_s=2400)
    failed = {n: m for n, (o, m) in outcomes.items() if o == "failed"}
    try:
        results = records.load_results(runs_dir() / side.run_id)
    except RefarchError:
        if not failed:
            raise
        results = {}  # the failed test's own message says why
    for name in [n for n in failed if _measured_out_of_bounds(n, results)]:
        print(f"refarch compare: on the {side.label} ({side.ref}) {name} is outside the profile's reference; "
              f"its figure is compared: {failed.pop(name).strip().splitlines()[0]}", file=sys.stderr, flush=True)
    if failed:
        name, msg = next(iter(failed.items()))
        raise RefarchError(f"compare: on the {side.label} ({side.ref}, run {side.run_id}) {name} failed: "
                           f"{msg.strip().splitlines()[0] if msg.strip() else 'no message'}")
    figs = records.figures(results)
    figs.pop("run_time_s", None)
    return figs


def candidate_tree(commit: str | None, root: Path = ROOT) -> ver.TreeHash:
    """The descriptor tree a comparison measured as its candidate: the git
    tree of ``commit``'s ``descriptors/``, or the working tree's as it is
    on disk (None); the gate checks it against the tree a release ships."""
    if commit is None:
        return ver.descriptor_tree_hash()
    return ver.TreeHash(ver.git("rev-parse", f"{commit}:descriptors", cwd=root), "git-tree")


def run(baseline: str, candidate: str = WORKTREE, repetitions: int = 5, profile: str = "local",
        overrides: dict | None = None, out: Path | None = None) -> dict:
    """Compare ``baseline`` and ``candidate`` (git refs; candidate default:
    the working tree) side by side; returns the comparison written to
    ``runs/compare-<time>/compare.json`` (and to ``out``).

    Raises:
        RefarchError: bad input (before anything is deployed), a side that
            does not deploy, or a failed measurement (both clusters are
            torn down either way).
    """
    from ..judge.criteria import load_criteria

    overrides = overrides or {}
    base_commit, cand_commit, arrangement = preflight(baseline, candidate, repetitions, profile, overrides)
    regression = load_criteria().regression
    tolerances = {**regression.tolerances, **regression.side_by_side}
    folder = runs_dir() / f"compare-{time.strftime('%Y%m%d-%H%M%S')}"
    folder.mkdir(parents=True)
    base_tree = extract(base_commit, folder / "baseline")
    cand_tree = DESCRIPTORS if cand_commit is None else extract(cand_commit, folder / "candidate")
    sides = [Side("baseline", baseline, base_tree, ver.architecture_version(base_tree / "VERSION")),
             Side("candidate", candidate, cand_tree, ver.architecture_version(cand_tree / "VERSION"))]
    figures: dict[str, list[dict]] = {"baseline": [], "candidate": []}

    def down(side: Side) -> None:
        print(f"refarch: tearing down the {side.label}'s cluster {side.run_id}", file=sys.stderr, flush=True)
        _down(side, folder / f"{side.label}.log")

    def teardown():
        for side in [s for s in sides if s.run_id]:
            down(side)

    def deploy(side: Side) -> None:
        print(f"refarch compare: deploying the {side.label} ({side.ref}, version {side.version})", flush=True)
        _up(side, profile, overrides, folder / f"{side.label}.log")

    def repetition(side: Side, rep: int) -> None:
        print(f"refarch compare: repetition {rep + 1}/{repetitions} on the {side.label}", flush=True)
        figures[side.label].append(measure(side, folder / f"{side.label}-{rep + 1}.xml"))

    run_ids = {}
    started = time.monotonic()
    with guarded(teardown, keep=lambda: False):
        if arrangement == SIDE_BY_SIDE:
            for side in sides:
                deploy(side)
            for rep in range(repetitions):
                for side in (sides if rep % 2 == 0 else sides[::-1]):
                    repetition(side, rep)
        else:
            for side in sides:
                deploy(side)
                for rep in range(repetitions):
                    repetition(side, rep)
                down(side)
                run_ids[side.label], side.run_id = side.run_id, ""
    result = {
        "baseline": sides[0].ref, "baseline_commit": base_commit, "baseline_version": sides[0].version,
        "candidate": candidate, "candidate_commit": cand_commit or ver.commit(), "candidate_version": sides[1].version,
        **{f"candidate_{k}": v for k, v in candidate_tree(cand_commit).as_dict().items()},
        "profile": profile, "overrides": overrides, "repetitions": repetitions, "machine": ver.machine(),
        "judge_hash": ver.judge_hash(), "duration_s": round(time.monotonic() - started, 1),
        "arrangement": arrangement, "run_ids": run_ids or {s.label: s.run_id for s in sides}, "runs": figures,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "figures": comparison.compare_all(figures["baseline"], figures["candidate"], tolerances,
                                          regression.not_compared),
    }
    text = json.dumps(result, indent=2) + "\n"
    (folder / "compare.json").write_text(text, encoding="utf-8")
    report.render_comparison(folder / "compare.json")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(folder / "compare.json", out)
    result["folder"] = str(folder)
    return result
