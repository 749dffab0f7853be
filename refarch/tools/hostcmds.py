"""The host commands the suite runs, the Debian packages that provide them,
and the stages that need them: one table (``ci/host-commands.tsv``) read by
``ci/bootstrap.sh`` (installs), the preflight (checks) and a unit test (the
code calls nothing that is not listed)."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import PreflightError
from ..judge.checks import cause_line, root_cause
from ..paths import ROOT

TABLE = ROOT / "ci" / "host-commands.tsv"


@dataclass(frozen=True)
class HostCommand:
    """One row: ``command`` is provided by Debian package ``package`` ("-"
    when it is not from Debian) and needed by ``stages``."""

    command: str
    package: str
    stages: tuple[str, ...]
    why: str

    def install_hint(self) -> str:
        if self.package == "-":
            return self.why
        return f"apt-get install {self.package}"


def load_table(path: Path = TABLE) -> list[HostCommand]:
    """The rows of the table (comments and blank lines skipped).

    Raises:
        ValueError: a row has fewer than three tab-separated fields.
    """
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) < 3:
            raise ValueError(f"{path}:{number}: want command<TAB>package<TAB>stages[<TAB>why]")
        rows.append(HostCommand(fields[0], fields[1], tuple(fields[2].split(",")),
                                fields[3] if len(fields) > 3 else ""))
    return rows


def _present(command: str) -> str | None:
    """shutil.which, or for a row that names a file (a path such as
    ``/usr/include/node/node.h``) the path when it exists."""
    if command.startswith("/"):
        return command if Path(command).exists() else None
    return shutil.which(command)


def missing(stages: Iterable[str], which=None, table: list[HostCommand] | None = None) -> list[HostCommand]:
    """Rows of ``stages`` whose command is not on PATH."""
    which = which or _present
    wanted = set(stages)
    return [row for row in (table or load_table()) if wanted & set(row.stages) and not which(row.command)]


def preflight(stages: Iterable[str], which=None) -> None:
    """Check the commands of ``stages`` before anything is created.

    Raises:
        PreflightError: one line naming each missing command and its package.
    """
    gone = missing(stages, which)
    if gone:
        raise PreflightError("missing host commands: " + ", ".join(
            f"{row.command} ({row.install_hint()})" for row in gone) + "; ci/bootstrap.sh installs them")


def _innermost_failed(body: str) -> str:
    """pytest's ``FAILED path::test - message`` summary nested deepest in
    ``body`` (a stage whose test ran a job that ran pytest quotes the job's
    summary behind prefixes such as ``E  [time] unit   > ``), from
    ``FAILED`` on and at most 400 characters; "" when none has a message."""
    found = [(m.start(), m.group(0)) for m in
             (re.search(r"FAILED \S+::\S+ - .+$", line) for line in body.splitlines()) if m]
    return max(found, key=lambda f: f[0])[1][:400] if found else ""


def stage_failures(output: str) -> list[str]:
    """The stages a fresh-machine run reported as failed.

    ``output`` holds ``stage NAME: passed`` / ``stage NAME: FAILED`` lines,
    each FAILED one followed by that stage's output (tests/fresh).  Returns
    ``stage NAME failed on a fresh machine after ci/bootstrap.sh: CAUSE`` per
    failed stage, CAUSE being the root-cause line of its output
    (:func:`refarch.judge.checks.root_cause`: a missing command first, e.g.
    ``bash: line 1: rsync: command not found``), else the innermost pytest
    ``FAILED ... - message`` line (a unit test that failed inside the
    pipeline stage's unit job, not the stage's own test), else the first
    ``FAILED`` line, else the last line.
    """
    out = []
    blocks = re.split(r"^(stage \S+: (?:passed|FAILED))$", output, flags=re.M)
    for head, body in zip(blocks[1::2], blocks[2::2], strict=True):
        if head.endswith("FAILED"):
            name = head.split()[1].rstrip(":")
            # A missing command or another root cause first; else pytest's
            # summary of the first failed test; else the last line.
            summary = _innermost_failed(body) or next(
                (line for line in body.splitlines() if line.startswith("FAILED ")), "")
            cause = re.sub(r"^E\s+", "", root_cause(body) or summary or cause_line(body)) or "no output"
            out.append(f"stage {name} failed on a fresh machine after ci/bootstrap.sh: {cause}")
    return out


@functools.cache
def version_line(cmd: tuple[str, ...]) -> str:
    """The first line ``cmd`` (a version query such as ``("podman",
    "--version")``) prints, asked once per process; ``"absent"`` when the
    command is missing, fails to start or prints nothing within 30 s."""
    if not shutil.which(cmd[0]):
        return "absent"
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "absent"
    return (out.strip().splitlines() or ["absent"])[0]
