"""Teardown that always runs: on pass, failure, exception, Ctrl-C and SIGTERM.

:func:`guarded` wraps a cluster's life.  SIGTERM is turned into
KeyboardInterrupt (Python already does so for SIGINT), so the running phase
stops its child processes and the ``finally`` tears down; while teardown
runs, further SIGINT/SIGTERM are ignored so that an impatient second Ctrl-C
cannot leave resources behind.  After the first interrupt, later ones are
ignored too: a CI runner's SIGTERM to the whole job and tox's SIGINT right
after it must not abort the teardown.  The first interrupt (signal and
phase) is kept in :data:`INTERRUPTED` for the reports.  (tox escalates
SIGINT to SIGTERM and SIGKILL within fractions of a second by default:
tox.ini raises those timeouts, and ``ci/tox`` makes tox treat SIGTERM as
Ctrl-C.)
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: Names of the phases running now, outermost first (see :func:`in_phase`).
_PHASES: list[str] = []
#: The first interrupt this process received: {"signal": "SIGTERM", "phase": "smoke"}.
INTERRUPTED: dict[str, str] = {}


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


#: Prints a line to the job log at once (the pytest plugin replaces it with
#: one that gets past pytest's output capture).
NOTIFY: Callable[[str], object] = _to_stderr


@contextmanager
def in_phase(name: str) -> Iterator[None]:
    """Mark the block as phase ``name`` (for the interrupt record)."""
    _PHASES.append(name)
    try:
        yield
    finally:
        _PHASES.pop()


def current_phase() -> str:
    """The innermost phase running now, or ``"setup"`` outside any."""
    return _PHASES[-1] if _PHASES else "setup"


def outputs_lost(fds: tuple[int, ...] = (1, 2)) -> bool:
    """True when the pipe of stdout or stderr (``fds``) has no reader any more: plain tox
    (not ci/tox) killed by the SIGTERM a CI runner sends to the whole job
    dies at once and takes the read end of pytest's output with it; every
    later write would raise BrokenPipeError, the teardown's too."""
    import select

    for fd in fds:
        try:
            poller = select.poll()
            poller.register(fd, select.POLLOUT)
            if any(events & select.POLLERR for _, events in poller.poll(0)):
                return True
        except (OSError, ValueError):
            continue
    return False


def _raise_interrupt(signum, _frame):
    name = signal.Signals(signum).name
    if INTERRUPTED:
        return  # already stopping (a Ctrl-C and the SIGTERM a runner sends after it)
    INTERRUPTED.update(signal=name, phase=current_phase())
    NOTIFY(f"refarch: received {name} during {INTERRUPTED['phase']}: stopping, then tearing down")
    raise KeyboardInterrupt(f"received {name}")


@contextmanager
def _signals_handled_by(handler) -> Iterator[None]:
    previous = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    for sig in _SIGNALS:
        signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def interrupts_raise():
    """Context manager: within it, SIGTERM (and SIGINT) raise KeyboardInterrupt."""
    return _signals_handled_by(_raise_interrupt)


def interrupts_ignored():
    """Context manager: within it, SIGINT and SIGTERM are ignored (teardown runs on)."""
    return _signals_handled_by(signal.SIG_IGN)


@contextmanager
def guarded(teardown: Callable[[], object], keep: Callable[[], bool]) -> Iterator[None]:
    """Run the block; afterwards call ``teardown()`` unless ``keep()`` says
    the user asked to keep the cluster.  Teardown also runs when the block
    raises (including KeyboardInterrupt from SIGINT/SIGTERM); its own error is
    raised only when the block itself succeeded."""
    INTERRUPTED.clear()
    try:
        with interrupts_raise():
            yield
    except BaseException:
        if not keep():
            with interrupts_ignored():
                try:
                    teardown()
                except Exception as exc:  # the original error matters more
                    print(f"refarch: teardown after failure: {exc}", file=sys.stderr)
        raise
    else:
        if not keep():
            with interrupts_ignored():
                teardown()
