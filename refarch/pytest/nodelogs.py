"""Node logs when something broke: before a run with a failed or errored
test is torn down (or, for a kept cluster, when its checks end), each node's
journal of the units that matter, the kernel log's tail, the effective sshd
settings, mounts and listening sockets, and any elastic job log are copied
to ``runs/<run id>/nodes/<node>/<what>.txt``.

All commands run in one new SSH connection per node, each with a time
limit; a node that
cannot be reached gets ``UNREACHABLE.txt`` with the reason, and on the local
cloud the same commands run out of band (podman exec), as a cloud's console
log would be read.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from .. import proc
from ..paths import runs_dir
from ..run import RunDir
from .hosts import probe_ssh
from .state import STATE, RunState, say

#: File name -> command run as root on the node.
COMMANDS: dict[str, str] = {
    "journal": "journalctl --no-pager -o short-iso -n 400 -u ssh -u chrony -u 'shared.mount' -u '*.mount'"
               " -u nfs-server -u nfs-kernel-server",
    "journal-errors": "journalctl --no-pager -o short-iso -p warning -n 200",
    "dmesg": "dmesg -T 2>&1 | tail -n 100",
    "sshd-T": "/usr/sbin/sshd -T",
    "mounts": "findmnt -l",
    "listening": "ss -Htulpn",
    "units-failed": "systemctl --failed --no-legend --no-pager",
    "elastic-jobs": "tail -n 200 /tmp/refarch-elastic-*.log 2>/dev/null || echo 'no elastic job log'",
}


def node_dir(rundir: Path, node: str) -> Path:
    """Where ``node``'s logs go: ``<run dir>/nodes/<node>/``."""
    return RunDir.at(rundir).node_logs_dir(node)


MARK = "=====refarch-log "


def script(timeout_s: int) -> str:
    """One shell script that runs every command of :data:`COMMANDS` with a
    time limit, each output after a ``=====refarch-log <name> <exit>`` line
    (one connection per node, not one per command)."""
    parts = []
    for name, command in COMMANDS.items():
        parts.append(f"out=$(timeout {timeout_s} sh -c {shlex.quote(command)} 2>&1); rc=$?; "
                     f"echo '{MARK}{name}' $rc; printf '%s\\n' \"$out\"")
    return "; ".join(parts)


def split(text: str) -> dict[str, tuple[str, str]]:
    """The script's output -> {name: (exit status, output)}."""
    out: dict[str, tuple[str, str]] = {}
    name, rc, lines = None, "", []
    for line in text.splitlines():
        if line.startswith(MARK):
            if name:
                out[name] = (rc, "\n".join(lines))
            name, _, rc = line[len(MARK):].partition(" ")
            lines = []
        elif name:
            lines.append(line)
    if name:
        out[name] = (rc, "\n".join(lines))
    return out


def _over_ssh(config: Path, node: str, timeout_s: int) -> str:
    r = proc.ssh_fresh(config, node, f"sudo -n sh -c {shlex.quote(script(timeout_s))}", connect_timeout_s=5,
                       timeout_s=timeout_s * len(COMMANDS) + 30)
    return (r.stdout or "") + (r.stderr or "")


def _out_of_band(console: list[str], timeout_s: int) -> str:
    r = proc.run([*console, "sh", "-c", script(timeout_s)],
                 timeout_s=timeout_s * len(COMMANDS) + 30, check=False)
    return (r.stdout or "") + (r.stderr or "")


def collect(rundir: Path, nodes: list[str], unreachable: dict[str, str] | None = None,
            console_of=None, timeout_s: int = 20) -> dict[str, list[str]]:
    """Copy every node's logs (:data:`COMMANDS`) under ``rundir/nodes/``.

    ``unreachable`` maps node -> why SSH fails (those go out of band when
    ``console_of(node)`` gives a command prefix that runs inside the node,
    such as the local cloud's ``podman exec``, else only the reason is
    written).  Returns {node: [files written]}; never raises for a node that
    fails (its file says what went wrong).
    """
    config = rundir / "ssh" / "config"
    written: dict[str, list[str]] = {}
    for node in nodes:
        out = node_dir(rundir, node)
        out.mkdir(parents=True, exist_ok=True)
        why = (unreachable or {}).get(node)
        files = []
        if why:
            (out / "UNREACHABLE.txt").write_text(why + "\n", encoding="utf-8")
            files.append("UNREACHABLE.txt")
            console = console_of(node) if console_of else None
            if console is None:
                written[node] = files
                continue
        try:
            text = _out_of_band(console, timeout_s) if why else _over_ssh(config, node, timeout_s)
        except Exception as exc:  # noqa: BLE001 - a log we cannot read must not hide the failure
            text = f"not collected: {exc}"
        sections = split(text)
        if not sections:
            (out / "NOT-COLLECTED.txt").write_text(text + "\n", encoding="utf-8")
            files.append("NOT-COLLECTED.txt")
        for name, (rc, body) in sections.items():
            (out / f"{name}.txt").write_text(f"$ {COMMANDS[name]}\n# exit {rc}\n{body}\n", encoding="utf-8")
            files.append(f"{name}.txt")
        written[node] = files
    return written


def collect_node_logs(config, state: RunState) -> None:
    """When any test failed or errored, copy every node's logs to
    ``runs/<id>/nodes/<node>/`` (refarch.pytest.nodelogs) before teardown; never
    raises (a log that cannot be read must not hide the failure)."""
    counts = state.results.counts()
    cluster = state.cluster
    if not (counts.get("failed") or counts.get("error")) or cluster is None or state.existing is not None:
        return
    if cluster.contract is None or state.results.node_logs:
        return
    try:
        state.reachability.clear()  # judge reachability now, not as it was during the checks
        names = cluster.contract.node_names
        down = {n: w for n in names if (w := probe_ssh(cluster, state, n))}
        written = collect(cluster.rundir.path, names, down,
                          console_of=lambda n: cluster.driver.node_console(cluster.context, n))
        state.results.node_logs = {"dir": str(cluster.rundir.node_logs_dir()), "nodes": written}
        say(config, f"refarch: node logs of the failed run in {cluster.rundir.node_logs_dir()}/")
    except Exception as exc:  # noqa: BLE001 - diagnosis must not break teardown
        say(config, f"refarch: node logs not collected: {exc}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed check's report names the folder its node's logs go to."""
    report = yield
    state = item.config.stash.get(STATE, None)
    if report.failed and state is not None and state.existing is None and hasattr(report.longrepr, "addsection"):
        params = getattr(getattr(item, "callspec", None), "params", {})
        where = RunDir.at(runs_dir() / state.run_id).node_logs_dir(params.get("node_name"))
        report.longrepr.addsection("node logs", f"collected before teardown into {where}/")
    return report


