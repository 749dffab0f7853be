"""Two versions measured side by side: the statistics.

Each figure (images/sec per world size, efficiency, bus bandwidth, ...) is
measured n times on the baseline's cluster and n times on the candidate's,
interleaved on one machine (refarch.compare).  What compares them is the
ratio candidate/baseline of the two medians, with a 95 % percentile
bootstrap interval (``scipy.stats.bootstrap``, both samples resampled
independently).  A bootstrap rather than a rank test because the verdict
needs the size of the change against a tolerance (a rank test only says
whether there is one) and the ratio of medians stays robust to one
disturbed repetition.  Source: Efron & Tibshirani, *An Introduction to the
Bootstrap* (1993), ch. 13 (percentile intervals).

The verdict against the policy's tolerance t of the figure (better: higher
or lower, refarch.gate.Tolerance):

- ``regression``: the whole interval lies on the bad side of 1 - t (1 + t
  for a figure where lower is better);
- ``improvement``: the whole interval lies on the good side of 1 + t (1 - t);
- ``inconclusive``: the interval reaches past the tolerance on the bad side
  but not wholly: a regression can be neither shown nor excluded ("need more
  repetitions"), never a pass;
- ``no change detected`` otherwise, with the interval shown.
"""

from __future__ import annotations

import math
import statistics

#: Bootstrap resamples (scipy's default is 9,999; 4,000 keep a comparison
#: of 5+5 repetitions under a second).
RESAMPLES = 4000
#: Fewest repetitions per version.
MIN_REPETITIONS = 3


def ratio_interval(baseline: list[float], candidate: list[float], seed: int = 0) -> tuple[float, float, float]:
    """median(candidate) / median(baseline) and its 95 % percentile
    bootstrap interval: (ratio, low, high), unitless.

    Raises:
        ValueError: fewer than :data:`MIN_REPETITIONS` figures on a side, or
            a figure that is not finite and positive.
    """
    for side, values in (("baseline", baseline), ("candidate", candidate)):
        if len(values) < MIN_REPETITIONS:
            raise ValueError(f"{side}: {len(values)} figures, at least {MIN_REPETITIONS} repetitions are needed")
        bad = [v for v in values if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0)]
        if bad:
            raise ValueError(f"{side}: figures must be finite and positive, got {bad[:3]}")
    import numpy as np
    from scipy import stats

    def ratio(b, c, axis=-1):
        return np.median(c, axis=axis) / np.median(b, axis=axis)

    res = stats.bootstrap((np.asarray(baseline, float), np.asarray(candidate, float)), ratio, vectorized=True,
                          paired=False, confidence_level=0.95, n_resamples=RESAMPLES, method="percentile",
                          random_state=np.random.default_rng(seed))
    ci = res.confidence_interval
    return statistics.median(candidate) / statistics.median(baseline), float(ci.low), float(ci.high)


def verdict(low: float, high: float, tolerance: float, better: str) -> str:
    """The verdict of an interval [low, high] of candidate/baseline against
    ``tolerance`` (a fraction) where ``better`` is "higher" or "lower"."""
    if better == "lower":  # a smaller figure is better: mirror the interval
        low, high = 1 / high, 1 / low
    if high < 1 - tolerance:
        return "regression"
    if low > 1 + tolerance:
        return "improvement"
    if low < 1 - tolerance:
        return "inconclusive"
    return "no change detected"


def compare_figure(name: str, baseline: list[float], candidate: list[float], tolerance: float, better: str,
                   seed: int = 0) -> dict:
    """One figure's comparison: figure, both sides' values and medians,
    ratio, ci95 [low, high], tolerance, better, verdict, and a message
    naming both medians and the interval.

    Raises:
        ValueError: see :func:`ratio_interval`.
    """
    ratio, low, high = ratio_interval(baseline, candidate, seed)
    result = verdict(low, high, tolerance, better)
    med_b, med_c = statistics.median(baseline), statistics.median(candidate)
    why = {"inconclusive": ": need more repetitions (the interval reaches past the tolerance)",
           "regression": f": worse than the tolerance {tolerance:.0%} allows"}.get(result, "")
    message = (f"{name}: {result} (candidate {med_c:.4g} against baseline {med_b:.4g}, median of "
               f"{len(candidate)} and {len(baseline)}; candidate/baseline {ratio:.3f}, 95 % interval "
               f"{low:.3f}-{high:.3f}; tolerance {tolerance:.0%}, {better} is better){why}")
    return {"figure": name, "baseline": list(baseline), "candidate": list(candidate),
            "baseline_median": med_b, "candidate_median": med_c, "ratio": round(ratio, 4),
            "ci95": [round(low, 4), round(high, 4)], "tolerance": tolerance, "better": better,
            "verdict": result, "message": message}


def compare_all(baseline_runs: list[dict], candidate_runs: list[dict], tolerances: dict) -> list[dict]:
    """Every figure both sides measured in every repetition, compared.

    ``*_runs`` are :func:`refarch.records.figures` dicts, one per
    repetition; ``tolerances`` maps a figure name (or its name before
    ``[``) to a :class:`refarch.gate.Tolerance`.  Figures without a
    tolerance, or missing from a repetition, are left out (a missing figure
    is reported by the caller)."""
    names = sorted(set.intersection(*(set(r) for r in baseline_runs + candidate_runs)))
    out = []
    for name in names:
        tol = tolerances.get(name) or tolerances.get(name.split("[", 1)[0])
        if tol is None:
            continue
        out.append(compare_figure(name, [r[name] for r in baseline_runs], [r[name] for r in candidate_runs],
                                  tol.relative, tol.better))
    return out
