"""Benchmark figures with their spread, and the reasons a scaling figure
cannot be judged.

Every throughput is the median of its per-step figures (images/sec of one
timed step) with the median's distribution-free 95 % confidence interval;
the scaling efficiency carries the interval that follows from its two
inputs.  A confidence interval of the median, not the steps' own spread
(Horovod's benchmark prints mean +- 1.96 standard deviations of the
iterations): the steps' spread does not shrink with more steps, so it cannot
say whether a figure is known well enough to judge; the median's interval
does, and it widens when the machine's speed changed during the measurement.

A scaling row cannot be judged (:func:`problems`) when its efficiency is
above 1 (no data-parallel job scales superlinearly: its np=1 baseline was
measured slower than the machine is), when the efficiency's interval is
wider than the profile allows, or when np=1 measured on its own and np=1
measured in rounds beside np=N (``tf2_synthetic_benchmark.py
--baseline-rounds``) disagree by more than the profile allows: the machine's
speed changed between them.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

#: Confidence of every interval.
CONFIDENCE = 0.95

#: Fewest samples whose interval reaches 95 %: with n samples the widest
#: interval (smallest to largest) covers the median with probability
#: 1 - 2 / 2**n, 0.969 at n = 6 and 0.9375 at n = 5.
MIN_SAMPLES = 6


def scaling_efficiency(throughput_n: float, throughput_1: float, world_size: int) -> float:
    """throughput(N) / (N x throughput(1)); throughputs in images/sec.

    Source: the usual weak-scaling definition used by the Horovod paper
    (Sergeev & Del Balso 2018, arXiv:1802.05799).

    Raises:
        ValueError: a throughput is not positive or ``world_size`` < 1.
    """
    if throughput_1 <= 0 or throughput_n <= 0:
        raise ValueError(f"throughputs must be positive (np=1: {throughput_1}, np={world_size}: {throughput_n})")
    if world_size < 1:
        raise ValueError(f"world size must be at least 1, got {world_size}")
    return throughput_n / (world_size * throughput_1)


@dataclass(frozen=True)
class Figure:
    """A median with its 95 % confidence interval [``low``, ``high``] (same
    unit: images/sec for throughputs, a ratio for efficiency), from
    ``samples`` per-step figures."""

    median: float
    low: float
    high: float
    samples: int

    @property
    def relative_width(self) -> float:
        """(high - low) / median."""
        return (self.high - self.low) / self.median

    def as_dict(self) -> dict:
        return {"median": round(self.median, 4), "ci95": [round(self.low, 4), round(self.high, 4)],
                "samples": self.samples}

    def text(self, percent: bool = False) -> str:
        """``40.1 (39.5-40.8)``, or ``54.2 % (50.1-58.0 %)`` with ``percent``."""
        if percent:
            return f"{100 * self.median:.1f} % ({100 * self.low:.1f}-{100 * self.high:.1f} %)"
        return f"{self.median:.1f} ({self.low:.1f}-{self.high:.1f})"


def median_ci(samples: list[float]) -> Figure:
    """The median of ``samples`` and its distribution-free 95 % confidence
    interval: the order statistics x(k) and x(n+1-k), k the largest with
    P(Binomial(n, 1/2) < k) <= 0.025.

    Source: Conover, *Practical Nonparametric Statistics* (3rd ed., 1999),
    section 3.2, the confidence interval of a quantile (what
    ``scipy.stats.quantile_test(...).confidence_interval()`` computes; scipy
    is not a dependency for these few lines).

    Raises:
        ValueError: fewer than :data:`MIN_SAMPLES` samples, or a sample is
            not a finite positive number.
    """
    bad = [x for x in samples if not (isinstance(x, (int, float)) and math.isfinite(x) and x > 0)]
    if bad:
        raise ValueError(f"samples must be finite and positive, got {bad[:3]}")
    n = len(samples)
    if n < MIN_SAMPLES:
        raise ValueError(f"{n} samples: at least {MIN_SAMPLES} are needed for a 95 % interval of the median")
    tail = (1 - CONFIDENCE) / 2
    k, below = 0, 0.0
    while below + math.comb(n, k) / 2 ** n <= tail:  # P(B <= k) <= tail, so x(k+1) may be the lower end
        below += math.comb(n, k) / 2 ** n
        k += 1
    ordered = sorted(samples)
    return Figure(statistics.median(ordered), ordered[k - 1], ordered[n - k], n)


def throughput(step_times_s: list[float], images_per_step: int) -> Figure:
    """images/sec of each step (``images_per_step`` / its seconds) as a
    :class:`Figure`.

    Raises:
        ValueError: see :func:`median_ci` (a step time of 0 or less included).
    """
    bad = [t for t in step_times_s if not (isinstance(t, (int, float)) and math.isfinite(t) and t > 0)]
    if bad:
        raise ValueError(f"step times must be finite and positive seconds, got {bad[:3]}")
    return median_ci([images_per_step / t for t in step_times_s])


def efficiency(at_n: Figure, at_1: Figure, world_size: int) -> Figure:
    """throughput(N) / (N x throughput(1)) of two medians, with the interval
    that follows from both inputs' intervals (low: slowest N over fastest 1;
    high: fastest N over slowest 1).

    Each ratio is :func:`scaling_efficiency`.

    Raises:
        ValueError: ``world_size`` < 1.
    """
    return Figure(scaling_efficiency(at_n.median, at_1.median, world_size),
                  scaling_efficiency(at_n.low, at_1.high, world_size),
                  scaling_efficiency(at_n.high, at_1.low, world_size), min(at_n.samples, at_1.samples))


def scaling_row(run: dict, single_job: dict) -> dict:
    """One row of the scaling table from the benchmark's result at world
    size N (``run``, its ``REFARCH_RESULT`` dict) and the np=1 job's result
    at the same batch size (``single_job``).

    Returns batch_size, world_size, hosts, images_per_sec (median,
    images/sec), images_per_sec_ci95 ([low, high]), baseline (the np=1
    figure the efficiency divides by: ``source`` "rounds" when the job
    measured rank 0 alone in rounds beside its own steps, else "np=1 job"),
    single_job (the np=1 job's figure), efficiency and efficiency_ci95
    (ratios), and drift (rounds' np=1 median over the np=1 job's, minus 1;
    None without rounds).

    Raises:
        ValueError: too few steps, or a step time not finite and positive.
    """
    n, batch = run["world_size"], run["batch_size"]
    at_n = throughput(run["step_times_s"], batch * n)
    alone = throughput(single_job["step_times_s"], batch)
    singles = [t for rnd in run.get("rounds") or [] for t in rnd.get("single_step_times_s", [])]
    baseline, source = (throughput(singles, batch), "rounds") if singles and n > 1 else (alone, "np=1 job")
    eff = efficiency(at_n, baseline, n) if n > 1 else Figure(1.0, 1.0, 1.0, at_n.samples)
    return {
        "batch_size": batch, "world_size": n, "hosts": run["hosts"],
        "images_per_sec": round(at_n.median, 3), "images_per_sec_ci95": [round(at_n.low, 3), round(at_n.high, 3)],
        "images_per_sec_mean": round(run["images_per_sec"], 3),
        "baseline": {"source": source, **baseline.as_dict()},
        "single_job": alone.as_dict(),
        "efficiency": round(eff.median, 4), "efficiency_ci95": [round(eff.low, 4), round(eff.high, 4)],
        "drift": round(baseline.median / alone.median - 1, 4) if source == "rounds" else None,
    }


def from_row(row: dict, key: str) -> Figure | None:
    """The :class:`Figure` a scaling row (:func:`scaling_row`) stores as
    ``key`` (its median) and ``key_ci95``; None for a row without an
    interval (a run made before figures had one)."""
    if not row.get(f"{key}_ci95"):
        return None
    low, high = row[f"{key}_ci95"]
    return Figure(row[key], low, high, 0)


def _stored(fig: dict) -> Figure:
    """A :class:`Figure` from its :meth:`Figure.as_dict`."""
    return Figure(fig["median"], *fig["ci95"], fig["samples"])


def problems(rows: list[dict], max_relative_width: float, max_drift: float) -> list[str]:
    """Why the scaling rows (:func:`scaling_row`) cannot be judged, one
    message per problem naming the world size and the figures: efficiency
    above 1, an efficiency interval wider than ``max_relative_width``
    (relative to its median), np=1 on its own and in rounds more than
    ``max_drift`` apart (a fraction).  Empty when every row can be judged."""
    out, several = [], len({r["batch_size"] for r in rows}) > 1
    for row in sorted(rows, key=lambda r: (r["batch_size"], r["world_size"])):
        n = row["world_size"]
        if n == 1:
            continue
        eff, base = from_row(row, "efficiency"), _stored(row["baseline"])
        at = f"np={n}" + (f" batch {row['batch_size']}" if several else "")
        inputs = (f"np={n} {from_row(row, 'images_per_sec').text()} images/sec, np=1 {base.text()} from the "
                  f"{row['baseline']['source']}")
        if eff.median > 1:
            out.append(f"{at} efficiency {100 * eff.median:.0f} % > 100 % ({inputs}): no data-parallel job scales "
                       "superlinearly, the np=1 baseline was disturbed")
        elif eff.relative_width > max_relative_width:
            out.append(f"{at} efficiency {eff.text(percent=True)} is too wide to judge (interval "
                       f"{100 * eff.relative_width:.0f} % of the figure, at most {100 * max_relative_width:.0f} %; "
                       f"{inputs}): the machine's speed changed while it was measured")
        if row.get("drift") is not None and abs(row["drift"]) > max_drift:
            out.append(f"np=1 measured {_stored(row['single_job']).text()} images/sec alone and {base.text()} in "
                       f"rounds beside {at} ({100 * row['drift']:+.0f} %, more than {100 * max_drift:.0f} % apart): "
                       "the machine's speed changed between the two, so no efficiency of this run can be trusted")
    return out
