"""The order and budget of the heavy tier (pure logic over recorded
standings and timings; :mod:`.runner` carries it out).

A heavy environment without a pass honoured for its current key
(:func:`refarch.ci.reuse.standing`) is a candidate.  Candidates are taken
in this order: inputs changed since their last pass, then never passed on
this machine (stopped at the budget, passed without a list of modules,
failed with the same key: in that order), then the oldest pass first; within a kind, in the order of
``ci/environments.yml``.  Each starts only when its expected seconds fit
what is left of the budget (a candidate that does not fit is passed over,
a later one may still fit); what did not fit stays pending, with the
reason.

Expected seconds (:func:`expected_s`): the environment's own newest time on
this machine, else its reference (``reference_s``, measured on the
reference machine of ``validation/timings.json``) times :func:`machine_scale`: how this machine did
on this run's change tier against the same references.
"""

from __future__ import annotations

from dataclasses import dataclass

from .environments import Environment
from .reuse import Standing

#: Order of the kinds of candidates (Standing.why).
ORDER = ("changed", "never", "stopped", "unreusable", "failed", "disabled", "old")
#: Bounds of machine_scale: a change tier cut short by a failure says
#: little about the machine, and one with warm caches (the node image and
#: wheelhouse built before) looks faster than the heavy tier will be.
SCALE_BOUNDS = (0.75, 5.0)


def machine_scale(measured_s: dict[str, float], envs: list[Environment]) -> float:
    """Sum of the seconds this run's change-tier environments took
    (``measured_s``: name -> seconds) over the sum of their references,
    bounded by :data:`SCALE_BOUNDS`; 1.0 when none was measured."""
    ref = sum(e.reference_s for e in envs if e.name in measured_s)
    if ref <= 0:
        return 1.0
    low, high = SCALE_BOUNDS
    return min(high, max(low, sum(measured_s[e.name] for e in envs if e.name in measured_s) / ref))


def expected_s(env: Environment, stand: Standing, scale: float) -> tuple[float, str]:
    """``(seconds, where from)``: this machine's newest pass of ``env``, else
    its reference scaled by ``scale``; at least as long as a later run that
    was stopped at the budget took."""
    if stand.last_seconds is not None:
        seconds, source = float(stand.last_seconds), "its newest pass on this machine"
    else:
        seconds, source = env.reference_s * scale, (f"its reference {env.reference_s:.0f} s x {scale:.2f} (this "
                                                    "machine's change tier)")
    if stand.at_least_s is not None and stand.at_least_s > seconds:
        return stand.at_least_s, "a run stopped at the budget after that long"
    return seconds, source


def order(candidates: list[tuple[Environment, Standing]]) -> list[tuple[Environment, Standing]]:
    """``candidates`` (heavy environments with no honoured pass, in the
    definitions' order) in the order they are tried (module docstring)."""
    indexed = list(enumerate(candidates))

    def rank(item):
        i, (_env, stand) = item
        kind = ORDER.index(stand.why) if stand.why in ORDER else len(ORDER)
        finished = float(stand.last["finished"]) if stand.why == "old" and stand.last else 0.0
        return kind, finished, i

    return [c for _i, c in sorted(indexed, key=rank)]


@dataclass
class Decision:
    """One heavy environment's place in a run: ``run`` (start it now),
    ``reuse`` (its pass is honoured) or ``pending`` (did not fit), with why."""

    env: Environment
    action: str
    why: str
    expected_s: float = 0.0


WHY = {"changed": "inputs changed since its last pass", "never": "never passed on this machine",
       "stopped": "stopped at the budget last time", "unreusable": "its last pass listed no module of the package",
       "failed": "failed last time with these inputs", "old": "its pass is too old",
       "disabled": "reuse turned off (REFARCH_CI_REUSE=0)"}


def decide(env: Environment, stand: Standing, left_s: float, scale: float, run_all: bool = False) -> Decision:
    """Run candidate ``env`` now, with ``left_s`` seconds of budget left, or
    leave it pending (its expected seconds do not fit); ``run_all`` runs it
    whatever the budget."""
    seconds, source = expected_s(env, stand, scale)
    why = WHY.get(stand.why, "")
    if run_all:
        return Decision(env, "run", "--all" + (f"; {why}" if why else ""), seconds)
    if seconds <= left_s:
        return Decision(env, "run", why, seconds)
    return Decision(env, "pending", f"{why}; expected {seconds:.0f} s ({source}) did not fit the "
                                    f"{max(left_s, 0):.0f} s left of the budget", seconds)


def candidates(heavy: list[tuple[Environment, Standing]], run_all: bool = False
               ) -> tuple[list[Decision], list[tuple[Environment, Standing]]]:
    """``(reused, to try)``: the heavy environments whose pass is honoured
    (none with ``run_all``), and the others in the order they are tried
    (:func:`order`; the definitions' order with ``run_all``)."""
    reused = [] if run_all else [Decision(env, "reuse", "inputs unchanged") for env, s in heavy if s.reusable]
    rest = [(env, s) for env, s in heavy if run_all or not s.reusable]
    return reused, (rest if run_all else order(rest))


def plan(heavy: list[tuple[Environment, Standing]], left_s: float, scale: float,
         run_all: bool = False) -> list[Decision]:
    """What a run would do with each heavy environment given ``left_s``
    seconds of budget, were each to take its expected seconds: the reused
    ones first, then the candidates in :func:`order`, each :func:`decide`-d
    with what the ones before it left."""
    reused, tried = candidates(heavy, run_all)
    out = list(reused)
    for env, stand in tried:
        decision = decide(env, stand, left_s, scale, run_all)
        if decision.action == "run":
            left_s -= decision.expected_s
        out.append(decision)
    return out
