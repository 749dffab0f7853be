"""Progress of long phases: no silence longer than 30 s in a job log.

:func:`heartbeat` prints a line when a phase starts (with the previous
run's duration as an estimate and the log to follow) and then one line
every ``every_s`` seconds until it ends, through
:data:`refarch.lifecycle.NOTIFY` (which gets past pytest's capture).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from . import lifecycle

#: Seconds between two progress lines (CI logs: at most this much silence).
EVERY_S = 30.0


def previous_duration(runs: Path, phase: str, exclude: str = "") -> float | None:
    """Seconds ``phase`` took in the most recent other run under ``runs``
    (run.json ``phases``) that has it; None when no run has."""
    best: tuple[float, float] | None = None
    for meta_file in runs.glob("*/run.json"):
        if meta_file.parent.name == exclude:
            continue
        try:
            meta = json.loads(meta_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        seconds = (meta.get("phases") or {}).get(phase)
        if seconds and (best is None or meta.get("started_at", 0) > best[0]):
            best = (meta.get("started_at", 0), float(seconds))
    return best[1] if best else None


@contextmanager
def heartbeat(what: str, estimate_s: float | None = None, log: Path | None = None,
              every_s: float = EVERY_S) -> Iterator[None]:
    """Announce ``what`` and repeat a line every ``every_s`` seconds while
    the block runs: "refarch: image build: 60 s so far (previous run: 93 s;
    log runs/X/logs/image.log)"."""
    hints = []
    if estimate_s:
        hints.append(f"previous run: {estimate_s:.0f} s")
    if log is not None:
        hints.append(f"log {log}")
    hint = f" ({'; '.join(hints)})" if hints else ""
    start, stop = time.monotonic(), threading.Event()

    def beat() -> None:
        while not stop.wait(every_s):
            lifecycle.NOTIFY(f"refarch: {what}: {time.monotonic() - start:.0f} s so far{hint}")

    lifecycle.NOTIFY(f"refarch: {what}: started{hint}")
    thread = threading.Thread(target=beat, name=f"heartbeat {what}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(2)
