"""Progress of long phases: no silence longer than 30 s in a job log.

:func:`heartbeat` prints a line when a phase starts (with the previous
run's duration as an estimate and the log to follow) and then one line
every ``every_s`` seconds until it ends, through
:data:`refarch.lifecycle.NOTIFY` (which gets past pytest's capture).

On a person's terminal (a controlling terminal, ``CI`` unset, and
``REFARCH_PROGRESS`` not ``plain``) the repeated lines are replaced by a
rich progress bar on that terminal: phase, elapsed time and the previous
run's duration as the bar's total. pytest captures the job's own stderr,
so the bar is drawn on ``/dev/tty``; CI logs keep the plain lines.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from . import lifecycle
from .run import RunDir

#: Seconds between two progress lines (CI logs: at most this much silence).
EVERY_S = 30.0


def previous_duration(runs: Path, phase: str, exclude: str = "") -> float | None:
    """Seconds ``phase`` took in the most recent other run under ``runs``
    (run.json ``phases``) that has it; None when no run has."""
    best: tuple[float, float] | None = None
    for rundir in RunDir.all(runs):
        if rundir.run_id == exclude:
            continue
        try:
            meta = json.loads(rundir.meta_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        seconds = (meta.get("phases") or {}).get(phase)
        if seconds and (best is None or meta.get("started_at", 0) > best[0]):
            best = (meta.get("started_at", 0), float(seconds))
    return best[1] if best else None


def terminal() -> IO[str] | None:
    """The person's terminal to draw progress bars on, opened for writing;
    None in CI (``CI`` set), with ``REFARCH_PROGRESS=plain``, or without a
    controlling terminal (then plain lines are printed)."""
    if os.environ.get("CI") or os.environ.get("REFARCH_PROGRESS", "auto") == "plain":
        return None
    if os.environ.get("TERM", "dumb") == "dumb":
        return None
    try:
        tty = open("/dev/tty", "w", encoding="utf-8")  # noqa: SIM115 - closed by the caller
    except OSError:
        return None
    if not tty.isatty():
        tty.close()
        return None
    return tty


def progress_bar(console: Console) -> Progress:
    """A transient rich progress display on ``console``: spinner, phase,
    bar (total: the previous run's seconds, when known), elapsed time and
    the estimate."""
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                    TimeElapsedColumn(), TextColumn("{task.fields[hint]}"),
                    console=console, transient=True, refresh_per_second=2)


@contextmanager
def _every(seconds: float, fn, name: str) -> Iterator[None]:
    """Call ``fn()`` every ``seconds`` in a daemon thread while the block runs."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(seconds):
            fn()

    thread = threading.Thread(target=loop, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(2)


#: The progress display drawn now (a nested phase adds a row to it).
_ACTIVE: list[Progress] = []


@contextmanager
def _bar(tty: IO[str], what: str, estimate_s: float | None, hint: str) -> Iterator[None]:
    start = time.monotonic()
    if _ACTIVE:
        bar, owner = _ACTIVE[-1], None
    else:
        bar = owner = progress_bar(Console(file=tty, force_terminal=True))
        owner.start()
        _ACTIVE.append(owner)
    task = bar.add_task(what, total=estimate_s or None, hint=hint)
    try:
        with _every(0.5, lambda: bar.update(task, completed=min(time.monotonic() - start, estimate_s or 0)),
                    f"progress {what}"):
            yield
    finally:
        bar.remove_task(task)
        if owner is not None:
            _ACTIVE.remove(owner)
            owner.stop()


@contextmanager
def heartbeat(what: str, estimate_s: float | None = None, log: Path | None = None,
              every_s: float = EVERY_S, tty: IO[str] | None = None) -> Iterator[None]:
    """Announce ``what`` and repeat a line every ``every_s`` seconds while
    the block runs: "refarch: image build: 60 s so far (previous run: 93 s;
    log runs/X/logs/image.log)". On a terminal (``tty``, by default
    :func:`terminal`) a rich progress bar replaces the repeated lines and a
    "done in N s" line ends the phase."""
    own_tty = tty is None
    tty = terminal() if own_tty else tty
    if tty is not None:
        hints = f"previous run: {estimate_s:.0f} s" if estimate_s else ""
        lifecycle.NOTIFY(f"refarch: {what}: started" + (f" (log {log})" if log is not None else ""))
        start = time.monotonic()
        try:
            with _bar(tty, what, estimate_s, hints):
                yield
        finally:
            lifecycle.NOTIFY(f"refarch: {what}: done in {time.monotonic() - start:.0f} s")
            if own_tty:
                with suppress(OSError):
                    tty.close()
        return
    hints = []
    if estimate_s:
        hints.append(f"previous run: {estimate_s:.0f} s")
    if log is not None:
        hints.append(f"log {log}")
    hint = f" ({'; '.join(hints)})" if hints else ""
    start = time.monotonic()
    lifecycle.NOTIFY(f"refarch: {what}: started{hint}")
    with _every(every_s, lambda: lifecycle.NOTIFY(f"refarch: {what}: {time.monotonic() - start:.0f} s so far{hint}"),
                f"heartbeat {what}"):
        yield
