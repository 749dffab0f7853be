"""Whether a running job still makes progress, read from its output: the
ranks' progress lines (the workloads' ``rank_progress.py``) and Horovod's
own stall warnings.

The job watch (:mod:`refarch.pytest.jobwatch`) polls a job's output and asks
:func:`stop_reason` whether to stop it: no rank reported anything for
:attr:`JobWatch.stall_s` seconds (a hang, or a rank so slow that the others
wait for it in every collective: the furthest any rank got, its stage or
step, was reached that long ago), or after :attr:`JobWatch.min_steps` steps
one rank's median compute time per step is :attr:`JobWatch.straggler_factor`
times the fastest rank's (a straggler the whole ring waits for).
:func:`slow_ranks` then names the rank(s) behind.  All pure functions,
tested on recorded output.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

#: The stages a rank passes, in order (``rank_progress.STAGES``).
STAGES = ("start", "init", "ready", "step")

_LINE = re.compile(r"REFARCH_PROGRESS rank=(\d+) stage=(\w+) t=([\d.]+)(?: step=(\d+))?(?: compute_s=([\d.]+))?")
_STALL = re.compile(r"waiting for remainder of ranks for more than (\d+) seconds")
_MISSING = re.compile(r"^(?:\[\d+\]<std\w+>:)?\s*(\d+): \[")


class JobWatch(BaseModel):
    """How a training job is watched while it runs (the profile's
    ``job_watch``).

    ``poll_s``: seconds between two reads of the job's output.  ``stall_s``:
    the longest a healthy job goes without a progress line from any rank
    (its start included: imports, tracing the first step), measured on the
    profile's machine (``source``).  ``straggler_factor``: slowest over
    fastest rank's median compute seconds per step at which the job is
    stopped, judged after ``min_steps`` steps of every rank.
    ``horovod_stall_check_s``: Horovod's own stall warning
    (``--stall-check-warning-time-seconds``, Horovod's default 60), which
    names the ranks that have not submitted a tensor the others wait on.
    """

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    poll_s: float = Field(5.0, gt=0)
    """Seconds between two reads of a watched job's output."""
    stall_s: float = Field(90.0, gt=0)
    """Seconds without a progress line from any rank after which the job is stopped as stalled."""
    straggler_factor: float = Field(4.0, gt=1)
    """Slowest over fastest rank's median compute seconds per step at which the job is stopped (a straggler)."""
    min_steps: int = Field(3, ge=1)
    """Compute times every rank must have reported before the straggler factor is judged."""
    horovod_stall_check_s: int = Field(30, ge=1)
    """Seconds before Horovod's own stall warning names the missing ranks (--stall-check-warning-time-seconds)."""
    source: str = ""
    """Where the watch's figures come from (measurements on the profile's machine), for the reader."""


@dataclass
class RankProgress:
    """One rank's progress so far: its furthest ``stage`` (index into
    :data:`STAGES`) and ``step`` number, when it first got there
    (``reached_t``, epoch seconds) and its compute seconds per job step."""

    rank: int
    stage: int = -1
    step: int = 0
    reached_t: float = 0.0
    compute_s: list[float] = field(default_factory=list)

    def position(self) -> tuple[int, int]:
        """(stage, step): what orders two ranks' progress."""
        return self.stage, self.step

    def where(self) -> str:
        """"step 3", "ready", or "no progress line"."""
        if self.stage < 0:
            return "no progress line"
        return f"step {self.step}" if STAGES[self.stage] == "step" else STAGES[self.stage]


def parse_progress(text: str, world_size: int) -> dict[int, RankProgress]:
    """Progress lines in a job's output -> {rank: RankProgress} for every rank
    0..world_size-1 (a rank with no line yet has stage -1)."""
    ranks = {r: RankProgress(r) for r in range(world_size)}
    for m in _LINE.finditer(text):
        rank, stage, t, step, compute = m.groups()
        p = ranks.get(int(rank))
        if p is None or stage not in STAGES:
            continue
        position = (STAGES.index(stage), int(step or 0))
        if position > p.position():
            p.stage, p.step = position
            p.reached_t = float(t)
        if compute:
            p.compute_s.append(float(compute))
    return ranks


def horovod_missing_ranks(text: str) -> list[int]:
    """The ranks Horovod's last stall warning lists as missing (its
    ``stall_inspector``: "Missing ranks:" then ``<rank>: [tensors]`` a line,
    each line prefixed by horovodrun with ``[r]<stderr>:``); [] when none."""
    lines = text.splitlines()
    start = max((i for i, line in enumerate(lines) if "Missing ranks:" in line), default=-1)
    if start < 0:
        return []
    missing = []
    for line in lines[start + 1:]:
        m = _MISSING.match(line)
        if not m:
            break
        missing.append(int(m.group(1)))
    return missing


def straggler(ranks: dict[int, RankProgress], min_steps: int) -> tuple[int, float] | None:
    """(slowest rank, its median compute seconds over the fastest rank's)
    once every rank has ``min_steps`` compute times; None before, or with
    one rank."""
    if len(ranks) < 2 or any(len(p.compute_s) < min_steps for p in ranks.values()):
        return None
    medians = {r: statistics.median(p.compute_s) for r, p in ranks.items()}
    slowest = max(medians, key=medians.get)
    fastest = min(medians.values())
    return slowest, (medians[slowest] / fastest if fastest > 0 else float("inf"))


def stop_reason(ranks: dict[int, RankProgress], started_t: float, now_t: float, watch: JobWatch) -> str | None:
    """Why the job should be stopped now, or None while it progresses.

    ``started_t``/``now_t``: epoch seconds of the launch and of this read
    (the clocks of the nodes are synchronised: the time checks hold them
    within milliseconds).
    """
    front = max(p.position() for p in ranks.values())
    since = min((p.reached_t for p in ranks.values() if p.position() == front), default=started_t)
    since = since if front[0] >= 0 else started_t
    if now_t - since >= watch.stall_s:
        return f"no rank got further for {now_t - since:.0f} s (stall window {watch.stall_s:g} s)"
    slow = straggler(ranks, watch.min_steps)
    if slow is not None and slow[1] >= watch.straggler_factor:
        return (f"rank {slow[0]}'s median compute time per step is {slow[1]:.1f} x the fastest rank's "
                f"(straggler factor {watch.straggler_factor:g})")
    return None


def slow_ranks(ranks: dict[int, RankProgress], missing: list[int]) -> list[int]:
    """The rank(s) behind: those at the least progress when the ranks
    differ (stage, then step), else Horovod's missing ranks, else the
    slowest by median compute time; [] when nothing tells them apart."""
    order = {r: p.position() for r, p in ranks.items()}
    if len(set(order.values())) > 1:
        least = min(order.values())
        return sorted(r for r, o in order.items() if o == least)
    if missing:
        return sorted(set(missing) & set(ranks))
    slow = straggler(ranks, 1)
    return [slow[0]] if slow is not None and slow[1] > 1.5 else []
