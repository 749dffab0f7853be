"""Who owns a run, decided from the machine, not from one checkout.

Every resource of a local run carries its owner in podman labels: the host,
the boot, the owner process id and that process's start time (so a reused
pid is not mistaken for the owner), and the run directory's absolute path
(which may lie in another checkout).  A sweep from any checkout reads the
labels and leaves a run alone while its owner process lives or while its run
directory says the cluster was kept.  Machine-wide state that must outlive a
checkout (subnet reservations) lives under :func:`machine_dir`.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

#: Label keys on every container, network and volume of a run.
LABEL_RUN_ID = "refarch.run_id"
LABEL_HOST = "refarch.owner_host"
LABEL_PID = "refarch.owner_pid"
LABEL_START = "refarch.owner_start"
LABEL_RUNDIR = "refarch.rundir"


def boot_id() -> str:
    """This boot's id (``/proc/sys/kernel/random/boot_id``), or ``""``."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return ""


def process_start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (field 22 of
    ``/proc/<pid>/stat``, see proc(5)), or None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after it.
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[19])


#: Set by a process that owns the runs its short-lived children make (the
#: role-scenario runner: Molecule's create step runs `refarch up` or
#: `refarch vm up`, which exit while the nodes live on): its pid.  Such runs
#: belong to that process, are not marked kept, and `sweep --stale` removes
#: them once it is gone (a runner killed with SIGKILL).
OWNER_ENV = "REFARCH_OWNER_PID"


def delegated() -> bool:
    """True when this process makes runs for the owner in :data:`OWNER_ENV`."""
    return bool(os.environ.get(OWNER_ENV))


@dataclass(frozen=True)
class Owner:
    """The process that owns a run.

    Attributes:
        host: hostname the owner ran on.
        start: ``<boot id>:<start ticks>`` of the owner process.
        pid: its process id.
        rundir: absolute path of the run directory (any checkout).
    """

    host: str
    pid: int
    start: str
    rundir: str

    @classmethod
    def current(cls, rundir: Path) -> Owner:
        """This process as the owner of the run in ``rundir``, or the process
        named by :data:`OWNER_ENV` when a longer-lived parent set it (see
        :func:`delegated`)."""
        pid = int(os.environ.get(OWNER_ENV) or os.getpid())
        return cls(socket.gethostname(), pid, f"{boot_id()}:{process_start_ticks(pid)}", str(rundir.resolve()))

    def labels(self) -> dict[str, str]:
        """The owner as podman labels."""
        return {LABEL_HOST: self.host, LABEL_PID: str(self.pid), LABEL_START: self.start,
                LABEL_RUNDIR: self.rundir}

    @classmethod
    def from_labels(cls, labels: dict[str, str]) -> Owner | None:
        """The owner recorded in ``labels``, or None when they hold none."""
        try:
            return cls(labels[LABEL_HOST], int(labels[LABEL_PID]), labels[LABEL_START], labels[LABEL_RUNDIR])
        except (KeyError, ValueError):
            return None

    def alive(self) -> bool:
        """True while the owner process runs.  An owner on another host (or
        whose liveness cannot be decided) counts as alive: never touch what
        you cannot prove is orphaned."""
        if self.host != socket.gethostname():
            return True
        boot, _, ticks = self.start.partition(":")
        if boot and boot != boot_id():
            return False
        now = process_start_ticks(self.pid)
        return now is not None and str(now) == ticks

    def kept(self) -> bool:
        """True when the run directory says the cluster was kept (and not
        destroyed since)."""
        try:
            meta = json.loads((Path(self.rundir) / "run.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return bool(meta.get("kept")) and not meta.get("destroyed")


def stale_verdict(labels: dict[str, str], include_kept: bool = False) -> tuple[bool, str]:
    """Whether a run whose resources carry ``labels`` may be swept as stale.

    Returns ``(stale, reason)``; the reason is one line for the sweep's output.
    Resources without owner labels are never stale (remove them by run id).
    """
    owner = Owner.from_labels(labels)
    if owner is None:
        return False, "no owner labels (made by an older suite?): remove it by run id if it is yours"
    if owner.alive():
        return False, f"owner process {owner.pid} on {owner.host} is alive ({owner.rundir})"
    if owner.kept() and not include_kept:
        return False, f"kept ({owner.rundir}); destroy it with `refarch destroy` or sweep --include-kept"
    return True, f"owner process {owner.pid} on {owner.host} is gone ({owner.rundir})"


def machine_dir() -> Path:
    """Machine-wide state shared by every checkout of this user: ``/run/refarch``
    for root (cleared at boot, like the processes it tracks), otherwise
    ``$XDG_RUNTIME_DIR/refarch`` (or ``/tmp/refarch-<uid>``).
    ``$REFARCH_MACHINE_DIR`` overrides it (tests)."""
    env = os.environ.get("REFARCH_MACHINE_DIR")
    if env:
        path = Path(env)
    elif os.geteuid() == 0:
        path = Path("/run/refarch")
    else:
        path = Path(os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/refarch-{os.geteuid()}") / "refarch"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path
