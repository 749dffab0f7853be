"""Each rank's progress as one line per stage or step on stdout, for the
suite's job watch (refarch/judge/stall.py) to see while the job runs.

A line is ``REFARCH_PROGRESS rank=<r> stage=<stage> t=<epoch s>`` with
``step=<n>`` and ``compute_s=<s>`` for a training step: the seconds the
rank took from the step's start until its own gradients were computed
(before it waited for the others in the allreduce).  Stages in order:
``start`` (imports done, before hvd.init), ``init`` (after it), ``ready``
(model built, before the first collective), ``step``.
"""

import os
import time

#: Stages in the order a rank passes them.
STAGES = ("start", "init", "ready", "step")


def rank() -> int:
    """This process's rank as the launcher set it (before hvd.init)."""
    for name in ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


def report(stage: str, step: int | None = None, compute_s: float | None = None) -> None:
    """Print one progress line (flushed at once)."""
    line = f"REFARCH_PROGRESS rank={rank()} stage={stage} t={time.time():.3f}"
    if step is not None:
        line += f" step={step}"
    if compute_s is not None:
        line += f" compute_s={compute_s:.4f}"
    print(line, flush=True)
