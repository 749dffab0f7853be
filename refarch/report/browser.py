"""Pages seen as a person sees them: Debian's ``chromium``, headless, for
the HTML report (tests/report) and the documentation site (tests/docs):
a screenshot, the DOM after scripts ran, and what the page logged."""

from __future__ import annotations

import subprocess

#: chromium's options for a headless render on a machine without a display
#: or a GPU, run as root (no sandbox), logging the page's console to stderr.
HEADLESS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0")


def chromium(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
    """``chromium`` headless with ``args`` (e.g. ``--screenshot=PATH URI``,
    ``--dump-dom URI``); output captured as text, never raises on its exit.

    Raises:
        subprocess.TimeoutExpired: it ran longer than ``timeout_s`` seconds.
    """
    return subprocess.run(["chromium", *HEADLESS, *args], capture_output=True, text=True, timeout=timeout_s,
                          check=False)


def console_messages(stderr: str) -> list[str]:
    """The lines of a headless run's stderr that are the page's console
    messages or uncaught errors (chromium tags them ``:CONSOLE``)."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
