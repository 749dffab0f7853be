"""Host helpers of the checks and workloads: whether a node answers SSH on a
fresh connection (:func:`probe_ssh`), a testinfra host that opens a new
connection per command (:func:`fresh_host`), and commands run as a user
with a time limit (:func:`run_as`)."""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

import testinfra

from .. import proc
from ..judge import checks

if TYPE_CHECKING:  # pragma: no cover
    from .state import RunState


def probe_ssh(cluster, run_state: RunState, name: str) -> str | None:
    """Why ``name`` cannot be reached over SSH, or None when it can.

    Opens a fresh connection (no shared ControlMaster connection: one opened
    before a fault would still reach a node whose sshd has gone) within
    10 s; the answer is cached for the session.  Returns e.g.
    ``"node2 (10.213.0.11:22): connection refused"``.
    """
    cache = run_state.reachability
    if name in cache:
        return cache[name]
    why = None
    if run_state.existing is None:
        node = cluster.contract.node(name)
        config = cluster.rundir.ssh_dir / "config"
        r = proc.ssh_fresh(config, name, "true", connect_timeout_s=10, timeout_s=30, batch=True)
        if r.returncode != 0:
            text = (r.stderr or r.stdout or "").strip()
            reason = checks.root_cause(text) or f"ssh exit {r.returncode}"
            short = re.sub(r"^ssh: connect to host \S+ port \d+: ", "", reason).lower()
            why = f"{name} ({node.address}:22): {short}"
    cache[name] = why
    return why


def fresh_host(cluster, name: str):
    """A testinfra host for node ``name`` whose every command opens a new
    SSH connection (:data:`refarch.proc.FRESH_CONNECTION`); for checks of sshd itself."""
    config = cluster.rundir.ssh_dir / "config"
    return testinfra.get_host(f"ssh://{name}", ssh_config=str(config), ssh_extra_args=proc.FRESH_CONNECTION)


#: The Python of the virtualenv that holds Horovod (beside horovodrun), for
#: commands run with :func:`run_as`.
HOROVOD_PYTHON = "$(dirname $(command -v horovodrun))/python"


#: The exit status :func:`run_as` reports for a command that exited 255.
EXIT_255 = 254
#: The exit statuses of a command :func:`run_as` stopped at its time limit:
#: coreutils' ``timeout`` exits 124 after its TERM, 137 after the KILL that
#: ``-k`` sends a command that outlived the TERM.
TIMED_OUT = (124, 137)


def timed_out(result, timeout_s: int) -> str | None:
    """"did not finish within ``timeout_s`` s" when :func:`run_as`'s
    ``result`` (a CommandResult) was stopped at its time limit, else None:
    what a check says instead of quoting the last line the command printed
    before it was stopped (TensorFlow's start-up notice, say)."""
    return f"did not finish within {timeout_s} s" if result.rc in TIMED_OUT else None


def run_as(host, user: str, command: str, timeout_s: int = 60):
    """Run ``command`` on ``host`` as ``user`` (login environment) with a time
    limit in seconds; returns testinfra's CommandResult (rc 124 on timeout).

    A command that exits 255 (ssh's own failure: mpirun or ssh to a peer
    refused) comes back as :data:`EXIT_255` with its output: testinfra
    takes 255 over SSH for a failure of its own connection and raises a
    RuntimeError that dumps the whole CommandResult."""
    return host.run(f"sudo -n -u {user} -H timeout -k 5 {timeout_s} bash -lc {shlex.quote(command)}; "
                    f"rc=$?; [ $rc -ne 255 ] || rc={EXIT_255}; exit $rc")


