"""Scaling: how the synthetic benchmark's throughput grows with the world
size, one rank per node (the ``smoke`` section sets the benchmark).

The jobs are the smoke and scaling runs (fixtures ``training_runs`` and
``scaling_runs``, refarch.pytest.workloads); their figures are medians with
95 % intervals (:mod:`refarch.properties.figures`).
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from pydantic import Field

from .. import stall
from . import figures
from .base import Group, Measurement, Property, Strict, across_nodes


class ReferenceCurve(Strict):
    """Published images/sec per world size, drawn beside the measured curve
    on an axis of its own (other hardware); ``source`` says where from."""

    images_per_sec: dict[int, float]
    """Published throughput per world size (world size -> images/sec), drawn in the report's scaling chart."""
    source: str
    """Where the published curve comes from (paper, hardware), shown with it in the report."""


class Smoke(Strict):
    """The synthetic benchmark.  ``batch_size`` (images per rank per step)
    is the one the smoke checks and the efficiency property use;
    ``batch_sizes`` adds others to the scaling table; ``world_sizes`` lists
    the world sizes measured (default 1..N, one rank per node)."""

    model: str
    """Keras application the synthetic benchmark trains (``tf.keras.applications``, e.g. ResNet50)."""
    image_size: int = Field(ge=32, le=512)
    """Side of the square synthetic images in pixels (the benchmark's --image-size)."""
    batch_size: int = Field(ge=1)
    """Images per rank per step of the smoke jobs and of scaling.efficiency (the benchmark's --batch-size)."""
    batch_sizes: list[int] = []
    """Further batch sizes (images per rank per step) measured at every world size for the scaling table."""
    world_sizes: list[int] = []
    """World sizes measured, one rank per node, each 1..nodes.count (empty: 1..N; 1 and N are always measured)."""
    warmup_steps: int = Field(ge=0)
    """Untimed steps each benchmark job runs before its timed ones (the benchmark's --warmup-steps)."""
    steps: int = Field(ge=6)
    """Timed steps per job: their per-step figures give each throughput's median and 95 % interval (at least 6)."""
    intra_op_threads: int = Field(1, ge=1)
    """TensorFlow intra-op threads per rank; the headroom check needs this many CPUs per rank on every node."""
    start_timeout_s: int = Field(120, ge=10)
    """Seconds horovodrun waits for every rank to start (--start-timeout of every horovodrun job, elastic included)."""
    gloo_timeout_s: int | None = Field(None, ge=1)
    """Seconds a rank waits in Gloo's rendezvous and collectives in every horovodrun job of the
    smoke, scaling, convergence and allreduce runs (horovodrun's --gloo-timeout-seconds, which it
    hands to every rank as HOROVOD_GLOO_TIMEOUT_SECONDS); unset: Horovod's default, 30.  Raise it
    where ranks reach ``hvd.init`` minutes apart (TensorFlow's import under QEMU's TCG)."""
    baseline_rounds: int = Field(3, ge=0)
    """Rounds in which every job at np > 1 also times rank 0 alone (its np=1 baseline); 0: the np=1 job is it."""
    max_relative_width: float = Field(0.5, gt=0)
    """Widest 95 % efficiency interval, relative to its median, that is still judged; wider is an error."""
    max_baseline_drift: float = Field(0.25, gt=0)
    """Largest relative difference between np=1 on its own and np=1 in rounds before the efficiency is an error."""
    reference_curve: ReferenceCurve | None = None
    """A published images/sec curve drawn beside the measured one in the report (None: none drawn)."""


def efficiency(request) -> Measurement:
    """scaling.efficiency from the scaling table's row at np=N and the
    smoke batch size."""
    n = across_nodes(request)
    smoke = request.getfixturevalue("profile").smoke
    table = request.getfixturevalue("scaling_runs")
    row = next(r for r in table if r["world_size"] == n and r["batch_size"] == smoke.batch_size)
    base = row["baseline"]
    return Measurement(row["efficiency"], {
        "efficiency_ci95": row["efficiency_ci95"], "scaling": table, "batch_size": row["batch_size"]},
        detail=(f" (95 % interval {100 * row['efficiency_ci95'][0]:.1f}-{100 * row['efficiency_ci95'][1]:.1f} %;"
                f" np={n} {row['images_per_sec']:.1f} images/sec, np=1 {base['median']:.1f} from the "
                f"{base['source']}; medians of the steps)"),
        error="; ".join(figures.problems(table, smoke.max_relative_width, smoke.max_baseline_drift)))


def straggler_ratio(request) -> Measurement:
    """scaling.straggler_ratio: in the smoke job at np=N, the slowest rank's
    median compute seconds per step over the fastest rank's (each rank's
    ``REFARCH_PROGRESS ... compute_s=`` lines, refarch.stall), naming both
    ranks' nodes (rank r runs on the r-th node).  Fails when a rank
    reported fewer compute times than figures.MIN_SAMPLES."""
    n = across_nodes(request)
    run = request.getfixturevalue("training_runs")[n]
    nodes = request.getfixturevalue("cluster").contract.node_names[:n]
    ranks = stall.parse_progress(Path(run["log"]).read_text(encoding="utf-8"), n)
    short = [f"rank {r} on {nodes[r]}: {len(p.compute_s)}" for r, p in ranks.items()
             if len(p.compute_s) < figures.MIN_SAMPLES]
    if short:
        pytest.fail(f"too few compute times per rank in the np={n} job (need {figures.MIN_SAMPLES}): "
                    f"{', '.join(short)} (full output: {run['log']})")
    medians = {r: statistics.median(p.compute_s) for r, p in ranks.items()}
    slow, fast = max(medians, key=medians.get), min(medians, key=medians.get)
    value = medians[slow] / medians[fast] if medians[fast] > 0 else float("inf")
    return Measurement(value, {"world_size": n, "log": run["log"], "median_compute_s": {
        f"rank {r} on {nodes[r]}": m for r, m in medians.items()}},
        detail=(f" (slowest: rank {slow} on {nodes[slow]}, median {medians[slow]:.3f} s of compute per step; "
                f"fastest: rank {fast} on {nodes[fast]}, {medians[fast]:.3f} s)"))


GROUP = Group("scaling", section=("smoke", Smoke), properties=(
    Property("efficiency", "ratio",
             "throughput(N) / (N x throughput(1)) of the synthetic benchmark, one rank per node (median images/sec "
             "of the steps, smoke batch size; np=1 timed in rounds beside np=N); an error when any world size "
             "gives more than 1, an interval too wide, or np=1 alone and in rounds disagree", efficiency),
    Property("straggler_ratio", "ratio",
             "in the smoke job at np=N, the slowest rank's median compute seconds per step over the fastest "
             "rank's (the time until its own gradients exist, before it waits in the allreduce), naming the "
             "slowest rank's node", straggler_ratio),
))
