"""Running the descriptors' playbook with the Ansible CLI.

``ansible-playbook`` runs in its own process group under a time limit
(:func:`refarch.proc.run`), with its output streamed into the run's log; the
PLAY RECAP is parsed into per-host counts so that idempotence (a second run
reports changed=0) can be checked.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .. import proc, retry
from ..errors import CommandError, PreflightError
from ..paths import ANSIBLE_DIR

_RECAP_LINE = re.compile(r"^(?P<host>\S+)\s+:\s+(?P<counts>(?:\w+=\d+\s*)+)$")


@dataclass
class PlaybookResult:
    """Outcome of one ``ansible-playbook`` run.

    ``recap`` maps host -> {ok, changed, unreachable, failed, skipped,
    rescued, ignored} counts; ``rc`` is the exit status.
    """

    rc: int
    recap: dict[str, dict[str, int]]
    output: str
    #: Attempts made (more than one after a retryable failure, see refarch.retry).
    attempts: int = 1

    @property
    def changed(self) -> dict[str, int]:
        """Host -> number of changed tasks."""
        return {host: counts.get("changed", 0) for host, counts in self.recap.items()}

    def changed_tasks(self) -> dict[str, list[str]]:
        """Host -> names of the tasks that reported ``changed``."""
        out: dict[str, list[str]] = {}
        task = "?"
        for line in self.output.splitlines():
            m = re.match(r"^(?:TASK|RUNNING HANDLER) \[(.*)\]", line)
            if m:
                task = m.group(1)
                continue
            m = re.match(r"^changed: \[([^\]]+)\]", line)
            if m:
                out.setdefault(m.group(1).split(" -> ")[0], []).append(task)
        return out

    def failed_hosts(self) -> list[str]:
        return sorted(h for h, c in self.recap.items() if c.get("failed") or c.get("unreachable"))


def parse_recap(output: str) -> dict[str, dict[str, int]]:
    """Per-host counts from the PLAY RECAP section of ``ansible-playbook``
    output (the last recap wins when there are several)."""
    recap: dict[str, dict[str, int]] = {}
    in_recap = False
    for raw in output.splitlines():
        line = re.sub(r"\x1b\[[0-9;]*m", "", raw).rstrip()
        if line.startswith("PLAY RECAP"):
            in_recap, recap = True, {}
            continue
        if in_recap:
            m = _RECAP_LINE.match(line)
            if m:
                counts = dict(pair.split("=") for pair in m.group("counts").split())
                recap[m.group("host")] = {k: int(v) for k, v in counts.items()}
            elif line.strip():
                in_recap = False
    return recap


def playbook_command() -> str:
    """Path of ``ansible-playbook``: beside this Python (its virtualenv) or on PATH.

    Raises:
        PreflightError: the Ansible CLI is not installed.
    """
    beside = Path(sys.executable).parent / "ansible-playbook"
    if beside.exists():
        return str(beside)
    found = shutil.which("ansible-playbook")
    if not found:
        raise PreflightError("ansible-playbook not found: install the suite's Python requirements (pip install -e .)")
    return found


def _failures(output: str) -> list[str]:
    """Each ``fatal:``/``failed:`` line joined with its indented detail lines."""
    found: list[str] = []
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(("fatal:", "failed:")):
            detail = [line.strip()]
            for nxt in lines[i + 1:i + 8]:
                if not nxt.startswith(" "):
                    break
                detail.append(nxt.strip())
            found.append(" ".join(detail))
    return found


def preflight() -> None:
    """Raises PreflightError when the Ansible CLI is not installed."""
    playbook_command()


def _ansible_env() -> dict[str, str]:
    """Environment of the Ansible CLI: the descriptors' ansible.cfg, plain
    output, and its own tools (ansible-galaxy, ...) from the same venv.
    Each task's start time and the slowest tasks go to the log
    (ansible.posix.profile_tasks: where a configure phase spends its time)."""
    return {
        "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg"),
        "ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_NOCOLOR": "1",
        "PYTHONUNBUFFERED": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def run_playbook(
    inventory: Path,
    log: Path,
    timeout_s: float,
    extra_vars_file: Path | None = None,
    playbook: Path = ANSIBLE_DIR / "site.yml",
    check: bool = True,
) -> PlaybookResult:
    """Run ``playbook`` against ``inventory`` within ``timeout_s`` seconds (all
    attempts together).  An attempt whose every failure is transient (a rule
    of :data:`refarch.retry.RETRYABLE`) is run again, up to the rule's
    attempts; the playbook is idempotent, so a re-run finishes the job.

    Raises:
        CommandError: the playbook failed (the message names the failed hosts
            and the last lines of output) and ``check`` is true.
        PhaseTimeout: it ran past ``timeout_s``.
    """
    cmd = [playbook_command(), "-i", str(inventory), str(playbook)]
    if extra_vars_file:
        cmd += ["-e", f"@{extra_vars_file}"]
    env = _ansible_env()
    deadline = time.monotonic() + timeout_s
    attempt = 1
    while True:
        done = proc.run(cmd, timeout_s=max(deadline - time.monotonic(), 1), log=log, env=env, check=False,
                        stream=True, cwd=ANSIBLE_DIR)
        rule = retry.classify(_failures(done.stdout)) if done.returncode != 0 else None
        if rule is None or attempt >= rule.attempts or deadline - time.monotonic() < rule.wait_s:
            break
        attempt += 1
        note = (f"refarch: retrying ansible-playbook (attempt {attempt}/{rule.attempts}) in {rule.wait_s:.0f} s: "
                f"{rule.id}: {rule.reason}")
        print(note, file=sys.stderr, flush=True)
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(note + "\n")
        time.sleep(rule.wait_s)
    result = PlaybookResult(done.returncode, parse_recap(done.stdout), done.stdout, attempt)
    if check and done.returncode != 0:
        failed = _failures(done.stdout)[-3:]
        hosts = ", ".join(result.failed_hosts()) or "unknown hosts"
        detail = " | ".join(f[:300] for f in failed) or (done.stdout.strip().splitlines() or ["no output"])[-1]
        raise CommandError(f"ansible-playbook failed on {hosts} (log: {log}): {detail}")
    return result


def run_module(inventory: Path, host: str, module: str, args: str, *, become_user: str | None = None,
               log: Path | None = None, timeout_s: float = 120) -> PlaybookResult:
    """Run one Ansible module on ``host`` (``ansible HOST -m MODULE -a ARGS``),
    as ``become_user`` when given; returns the outcome (``rc``, output) and
    never raises for a failed module.

    Raises:
        PhaseTimeout: it ran past ``timeout_s`` seconds.
    """
    cmd = [str(Path(playbook_command()).with_name("ansible")), host, "-i", str(inventory), "-m", module, "-a", args]
    if become_user:
        cmd += ["--become", "--become-user", become_user]
    done = proc.run(cmd, timeout_s=timeout_s, log=log, env=_ansible_env(), check=False, cwd=ANSIBLE_DIR)
    return PlaybookResult(done.returncode, {}, (done.stdout or "") + (done.stderr or ""))


def failure_message(output: str) -> str:
    """The ``msg`` of the first failure in Ansible's output, on one line (the
    JSON form and the YAML callback's block form both), or its last line."""
    m = re.search(r'"msg": "((?:[^"\\]|\\.)*)"', output)
    if m:
        return m.group(1).replace("\\n", " ").replace('\\"', '"')[:400]
    lines = output.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)msg: (.*)$", line)
        if not m:
            continue
        indent, value = len(m.group(1)), m.group(2).strip()
        if value not in ("|", "|-", ">", ">-"):
            return value[:400]
        block = []
        for nxt in lines[i + 1:]:
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                break
            block.append(nxt.strip())
        return " ".join(b for b in block if b)[:400]
    return (output.strip().splitlines() or ["no output"])[-1][:400]
