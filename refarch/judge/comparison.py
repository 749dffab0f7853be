"""Two versions measured side by side: the statistics.

Each figure (images/sec per world size, efficiency, bus bandwidth, ...) is
measured n times on the baseline's cluster and n times on the candidate's,
interleaved on one machine (refarch.cli.compare).  What compares them is the
ratio candidate/baseline of the two medians, with a 95 % percentile
bootstrap interval (``scipy.stats.bootstrap``, both samples resampled
independently).  A bootstrap rather than a rank test because the verdict
needs the size of the change against a tolerance (a rank test only says
whether there is one) and the ratio of medians stays robust to one
disturbed repetition.  Source: Efron & Tibshirani, *An Introduction to the
Bootstrap* (1993), ch. 13 (percentile intervals).

The verdict against the release criteria's tolerance of the figure (refarch.judge.gate.
Tolerance: ``relative`` t, ``absolute`` a in the figure's unit, ``better``
higher or lower), on the interval [low, high] of candidate/baseline, with
m the baseline's median:

- ``regression``: the whole interval lies past the tolerance on the bad
  side: high < 1 - t (higher is better) or low > 1 + t (lower is better),
  and even its near end is a change of more than a (|1 - near end| * m);
- ``improvement``: the whole interval lies on the good side: low > 1 + t,
  or high < 1 / (1 + t);
- ``inconclusive``: the interval reaches past the relative tolerance on the
  bad side but not wholly, and its far end is a change of more than a: a
  regression can be neither shown nor excluded ("need more repetitions"),
  never a pass;
- ``no change detected`` otherwise, with the interval shown (also when
  every change the interval allows is within a).

Lower is better (recovery seconds) is bounded on the ratio itself (1 + t),
not by mirroring the interval: a tolerance of 100 % means twice as long.
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


def verdict(low: float, high: float, tolerance: float, better: str, absolute: float = 0.0,
            scale: float = 1.0) -> str:
    """The verdict of an interval [low, high] of candidate/baseline against
    ``tolerance`` (a fraction) and ``absolute`` (in the figure's unit, for a
    baseline median ``scale``) where ``better`` is "higher" or "lower"
    (module docstring)."""
    if better == "lower":
        bad_near, bad_far = low - 1, high - 1  # growth at the interval's ends
        past_all, past_some = low > 1 + tolerance, high > 1 + tolerance
        good = high < 1 / (1 + tolerance)
    else:
        bad_near, bad_far = 1 - high, 1 - low  # loss at the interval's ends
        past_all, past_some = high < 1 - tolerance, low < 1 - tolerance
        good = low > 1 + tolerance
    if past_all and bad_near * scale > absolute:
        return "regression"
    if good:
        return "improvement"
    if past_some and bad_far * scale > absolute:
        return "inconclusive"
    return "no change detected"


def compare_figure(name: str, baseline: list[float], candidate: list[float], tolerance: float, better: str,
                   seed: int = 0, absolute: float = 0.0) -> dict:
    """One figure's comparison: figure, both sides' values and medians,
    ratio, ci95 [low, high], tolerance, absolute, better, verdict, and a
    message naming both medians and the interval.

    Raises:
        ValueError: see :func:`ratio_interval`.
    """
    ratio, low, high = ratio_interval(baseline, candidate, seed)
    med_b, med_c = statistics.median(baseline), statistics.median(candidate)
    result = verdict(low, high, tolerance, better, absolute, med_b)
    why = {"inconclusive": ": need more repetitions (the interval reaches past the tolerance)",
           "regression": f": worse than the tolerance {tolerance:.0%} allows"}.get(result, "")
    message = (f"{name}: {result} (candidate {med_c:.4g} against baseline {med_b:.4g}, median of "
               f"{len(candidate)} and {len(baseline)}; candidate/baseline {ratio:.3f}, 95 % interval "
               f"{low:.3f}-{high:.3f}; tolerance {tolerance:.0%}{f' and {absolute:g}' if absolute else ''}, "
               f"{better} is better){why}")
    return {"figure": name, "baseline": list(baseline), "candidate": list(candidate),
            "baseline_median": med_b, "candidate_median": med_c, "ratio": round(ratio, 4),
            "ci95": [round(low, 4), round(high, 4)], "tolerance": tolerance, "absolute": absolute, "better": better,
            "verdict": result, "message": message}


def missing(baseline_runs: list[dict], candidate_runs: list[dict]) -> list[dict]:
    """Figures that some repetition measured and another did not, each as a
    comparison entry with verdict ``missing`` and a message naming the
    repetitions without it (``baseline 2``: the baseline's second).  A
    figure a side lost is a measurement that stopped, never a pass."""
    sides = [("baseline", r) for r in baseline_runs] + [("candidate", r) for r in candidate_runs]
    out = []
    for name in sorted(set().union(*(set(r) for _, r in sides))):
        lacking = [f"{label} {i + 1}" for label in ("baseline", "candidate")
                   for i, r in enumerate(r for lab, r in sides if lab == label) if name not in r]
        if lacking:
            out.append({"figure": name, "verdict": "missing", "missing_from": lacking,
                        "message": f"{name}: missing from repetition(s) {', '.join(lacking)}: not compared"})
    return out


def compare_all(baseline_runs: list[dict], candidate_runs: list[dict], tolerances: dict,
                not_compared: dict | None = None) -> list[dict]:
    """Every figure either side measured: compared when every repetition of
    both sides has it; verdict ``missing`` (:func:`missing`) when one
    lacks it; verdict ``no tolerance`` when the release criteria give it
    neither a tolerance nor a reason it is not compared.

    ``*_runs`` are :func:`refarch.judge.records.figures` dicts, one per
    repetition; ``tolerances`` maps a figure name (or its name before
    ``[``) to a :class:`refarch.judge.criteria.Tolerance`; ``not_compared``
    maps such a name to the reason it is judged by its own bounds only."""
    not_compared = not_compared or {}
    gaps = missing(baseline_runs, candidate_runs)
    lost = {g["figure"] for g in gaps}
    out = list(gaps)
    names = sorted(set().union(*(set(r) for r in baseline_runs + candidate_runs)) - lost)
    for name in names:
        base = name.split("[", 1)[0]
        tol = tolerances.get(name) or tolerances.get(base)
        if tol is None:
            if name not in not_compared and base not in not_compared:
                out.append({"figure": name, "verdict": "no tolerance",
                            "message": f"{name}: the release criteria give it no tolerance and no reason it is "
                                       "not compared"})
            continue
        out.append(compare_figure(name, [r[name] for r in baseline_runs], [r[name] for r in candidate_runs],
                                  tol.relative, tol.better, absolute=tol.absolute))
    return sorted(out, key=lambda f: f["figure"])
