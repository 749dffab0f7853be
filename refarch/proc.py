"""Running external commands with a time limit and a log file."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from .errors import CommandError, PhaseTimeout

#: Options every podman container the suite starts on this kind of host
#: needs (crun fails with hybrid cgroups; podman's default ulimits exceed
#: the hard limits): the wheelhouse build and the toolset image's build.
PODMAN_OPTS = ("--runtime", "runc", "--ulimit", "nofile=1024:4096", "--ulimit", "nproc=4096:8192")


def run(
    cmd: Sequence[str],
    *,
    timeout_s: float | None = None,
    log: Path | None = None,
    env: Mapping[str, str] | None = None,
    input_text: str | None = None,
    check: bool = True,
    cwd: Path | None = None,
    stdin=None,
    stream: bool = False,
) -> subprocess.CompletedProcess:
    """Run ``cmd`` in its own process group and return the completed process
    (text ``stdout``/``stderr``).

    ``timeout_s`` is in seconds; when it passes, the process group gets
    SIGTERM, then SIGKILL 10 s later, and :class:`PhaseTimeout` is raised.
    Any exception while waiting (Ctrl-C, SIGTERM turned into
    KeyboardInterrupt) stops the group the same way before it propagates.
    Output is appended to ``log`` when given; with ``stream`` it is written
    there as it comes (for long phases) and returned as ``stdout``.
    ``stdin`` may be a file or pipe; ``input_text`` sends a string instead.

    Raises:
        CommandError: the command is missing or exits non-zero and ``check``.
        PhaseTimeout: the time limit passed.
    """
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    log_fh = None
    if stream:
        if log is None:
            raise ValueError("stream needs a log file")
        log.parent.mkdir(parents=True, exist_ok=True)
        log_fh = open(log, "a+", encoding="utf-8")
        log_fh.write(f"$ {' '.join(cmd)}\n")
        log_fh.flush()
        offset = log_fh.tell()
    try:
        proc = subprocess.Popen(
            list(cmd),
            stdin=subprocess.PIPE if input_text is not None else (stdin or subprocess.DEVNULL),
            stdout=log_fh or subprocess.PIPE,
            stderr=subprocess.STDOUT if log_fh else subprocess.PIPE,
            text=True,
            env=full_env,
            cwd=cwd,
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise CommandError(f"{cmd[0]}: command not found") from exc
    try:
        try:
            out, err = proc.communicate(input_text, timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            _kill_group(proc)
            out, err = proc.communicate()
            if not stream:
                _append_log(log, cmd, out, err, "timeout")
            raise PhaseTimeout(f"{' '.join(cmd[:3])} ran past its {timeout_s:.0f} s limit") from exc
        except BaseException:
            _kill_group(proc)
            raise
        if log_fh:
            log_fh.seek(offset)
            out, err = log_fh.read(), ""
            log_fh.write(f"[exit: {proc.returncode}]\n")
        else:
            _append_log(log, cmd, out, err, proc.returncode)
    finally:
        if log_fh:
            log_fh.close()
    result = subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)
    if check and proc.returncode != 0:
        tail = ((err or "").strip() or (out or "").strip()).splitlines()[-5:]
        raise CommandError(f"{' '.join(cmd[:4])} exited {proc.returncode}: " + " | ".join(tail))
    return result


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _append_log(log: Path | None, cmd, out: str, err: str, status) -> None:
    if log is None:
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(f"$ {' '.join(cmd)}\n{out or ''}{err or ''}[exit: {status}]\n")


#: ssh options that open a new connection instead of reusing a shared one
#: (ControlMaster): a connection opened before a fault would still reach a
#: node whose sshd has since gone or changed.
FRESH_CONNECTION = "-o ControlMaster=no -o ControlPath=none"


def ssh_fresh(ssh_config: Path, node: str, command: str, *, connect_timeout_s: int, timeout_s: float,
              batch: bool = False) -> subprocess.CompletedProcess:
    """``command`` on ``node`` (a Host of ``ssh_config``) over a new SSH
    connection (:data:`FRESH_CONNECTION`), never raising for its exit status.

    Raises:
        PhaseTimeout: ``timeout_s`` seconds passed.
    """
    cmd = ["ssh", "-F", str(ssh_config), *FRESH_CONNECTION.split(), "-o", f"ConnectTimeout={connect_timeout_s}"]
    if batch:
        cmd += ["-o", "BatchMode=yes"]
    return run([*cmd, node, command], timeout_s=timeout_s, check=False)


def in_netns(container: str, *cmd: str, input_text: str | None = None, check: bool = True,
             timeout_s: float = 60) -> subprocess.CompletedProcess:
    """Run ``cmd`` from this host inside the network namespace of podman
    container ``container`` (``nsenter -t <its pid> -n``): the host's own
    ``nft``, ``ss`` and ``ip`` act on the node's namespace.

    Raises:
        CommandError: the container has no process (not running), or ``cmd``
            failed and ``check`` is true.
    """
    pid = container_pid(container)
    return run(["nsenter", "-t", pid, "-n", *cmd], timeout_s=timeout_s, input_text=input_text, check=check)


def container_pid(container: str) -> str:
    """The host PID of podman container ``container``'s first process.

    Raises:
        CommandError: the container has no process (not running).
    """
    pid = run(["podman", "inspect", "-f", "{{.State.Pid}}", container], timeout_s=30).stdout.strip()
    if pid in ("", "0"):
        raise CommandError(f"{container} is not running: no network namespace to enter")
    return pid
