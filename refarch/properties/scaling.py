"""Scaling: how the synthetic benchmark's throughput grows with the world
size, one rank per node (the ``smoke`` section sets the benchmark).

The jobs are the smoke and scaling runs (fixtures ``training_runs`` and
``scaling_runs``, refarch.pytest.workloads); their figures are medians with
95 % intervals (:mod:`refarch.properties.figures`).
"""

from __future__ import annotations

from pydantic import Field

from . import figures
from .base import Group, Measurement, Property, Strict, across_nodes


class ReferenceCurve(Strict):
    """Published images/sec per world size, drawn beside the measured curve
    on an axis of its own (other hardware); ``source`` says where from."""

    images_per_sec: dict[int, float]
    source: str


class Smoke(Strict):
    """The synthetic benchmark.  ``batch_size`` (images per rank per step)
    is the one the smoke checks and the efficiency property use;
    ``batch_sizes`` adds others to the scaling table; ``world_sizes`` lists
    the world sizes measured (default 1..N, one rank per node)."""

    model: str
    image_size: int = Field(ge=32, le=512)
    batch_size: int = Field(ge=1)
    batch_sizes: list[int] = []
    world_sizes: list[int] = []
    warmup_steps: int = Field(ge=0)
    #: Timed steps per job: their per-step figures give each throughput's
    #: median and 95 % interval (refarch.properties.figures, at least 6 steps).
    steps: int = Field(ge=6)
    intra_op_threads: int = Field(1, ge=1)
    start_timeout_s: int = Field(120, ge=10)
    #: Rounds in which every job at np > 1 also times rank 0 training alone
    #: (its np=1 baseline, measured beside its own steps: a machine whose
    #: speed changes shows it in both); 0: the np=1 job is the baseline.
    baseline_rounds: int = Field(3, ge=0)
    #: Widest efficiency interval (95 %, relative to its median) that is
    #: still judged; wider is an error (refarch.properties.figures.problems).
    max_relative_width: float = Field(0.5, gt=0)
    #: Largest relative difference between np=1 on its own and np=1 in the
    #: rounds before the run's efficiency is an error.
    max_baseline_drift: float = Field(0.25, gt=0)
    reference_curve: ReferenceCurve | None = None


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


GROUP = Group("scaling", section=("smoke", Smoke), properties=(
    Property("efficiency", "ratio",
             "throughput(N) / (N x throughput(1)) of the synthetic benchmark, one rank per node (median images/sec "
             "of the steps, smoke batch size; np=1 timed in rounds beside np=N); an error when any world size "
             "gives more than 1, an interval too wide, or np=1 alone and in rounds disagree", efficiency),
))
