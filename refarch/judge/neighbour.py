"""A busy neighbour, for fault cases: CPU load on a node that comes and goes
with one kind of job, as other work on a shared host or hypervisor takes a
node's share of the machine for part of a run.

``python -m refarch.judge.neighbour CONTAINER PATTERN WORKERS SECONDS`` watches
the processes in the pid namespace of the podman container ``CONTAINER``
(from the host's /proc) and, while one of them has the words of
``PATTERN`` among its arguments (e.g. ``--gloo -np 1``: the np=1 job),
keeps ``WORKERS`` busy shell loops running in that container, in its share
of the machine.  It exits after ``SECONDS``, when the container is gone, or
on SIGTERM, and stops its loops (named :data:`MARK`) as it goes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

#: The busy loops' $0 in the node: ``pkill -f`` finds them by it.
MARK = "refarch-neighbour"


def namespace_of(pid: int | str) -> str:
    """The pid namespace of ``pid`` (``pid:[4026532324]``), "" when it is gone."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


def running(namespace: str, words: list[str]) -> bool:
    """True while a process in ``namespace`` has ``words`` among its
    command-line arguments (adjacent, in that order)."""
    n = len(words)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if any(args[i:i + n] == words for i in range(len(args) - n + 1)) and namespace_of(entry.name) == namespace:
            return True
    return False


def _start(container: str, workers: int) -> None:
    for _ in range(workers):
        subprocess.run(["podman", "exec", "-d", container, "sh", "-c", "while :; do :; done", MARK],
                       check=True, capture_output=True, timeout=60)


def mark_pattern() -> str:
    """A ``pkill -f``/``pgrep -f`` pattern that finds the busy loops and
    not its own command line (the bracket)."""
    return MARK[:-1] + f"[{MARK[-1]}]"


def _stop(container: str) -> None:
    subprocess.run(["podman", "exec", container, "pkill", "-f", mark_pattern()],
                   check=False, capture_output=True, timeout=60)


def main(argv: list[str]) -> int:
    container, pattern, workers, seconds = argv[0], argv[1], int(argv[2]), float(argv[3])
    init = subprocess.run(["podman", "inspect", "--format", "{{.State.Pid}}", container],
                          capture_output=True, text=True, check=False).stdout.strip()
    namespace = namespace_of(init) if init.isdigit() and init != "0" else ""
    if not namespace:
        print(f"{container}: no running container", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    words, busy, deadline = pattern.split(), False, time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and namespace_of(init) == namespace:
            if running(namespace, words) != busy:
                busy = not busy
                _start(container, workers) if busy else _stop(container)
                print(f"{time.strftime('%H:%M:%S')} {'started' if busy else 'stopped'} {workers} busy loops",
                      flush=True)
            time.sleep(0.2)
    finally:
        if busy:
            _stop(container)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
