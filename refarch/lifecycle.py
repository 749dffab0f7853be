"""Teardown that always runs: on pass, failure, exception, Ctrl-C and SIGTERM.

:func:`guarded` wraps a cluster's life.  SIGTERM is turned into
KeyboardInterrupt (Python already does so for SIGINT), so the running phase
stops its child processes and the ``finally`` tears down; while teardown
runs, further SIGINT/SIGTERM are ignored so that an impatient second Ctrl-C
cannot leave resources behind.  (tox escalates SIGINT to SIGTERM and SIGKILL
within fractions of a second by default: tox.ini raises those timeouts.)
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _raise_interrupt(signum, _frame):
    raise KeyboardInterrupt(f"received {signal.Signals(signum).name}")


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
