"""A training job that never waits out its whole time limit in silence.

:func:`watched_run` starts a job's command detached on its launching node
(its output to a file in the training user's home), reads the output every
``job_watch.poll_s`` seconds and stops the job as soon as
:func:`refarch.stall.stop_reason` says it no longer progresses (no
rank reported for the stall window, or a straggler the whole ring waits
for).  A stopped job's failure names the rank(s) behind, their node, what
Horovod's stall check said and what each node shows
(:func:`refarch.pressure.diagnosis`: memory pressure, CPU throttling) since
the job started.
"""

from __future__ import annotations

import base64
import shlex
import time
from dataclasses import dataclass

from .. import pressure, stall
from .hosts import run_as

#: Where a watched job's output and exit status go on its launching node
#: (in the training user's home: a full /tmp must not hide them).
JOB_DIR = "$HOME/.refarch-jobs"


@dataclass
class JobResult:
    """A watched job's end: ``rc`` (exit status; None when it was stopped),
    ``output`` (stdout and stderr together, as written), ``seconds`` since
    its start at ``started_t`` (the launching node's clock, epoch seconds),
    and ``stopped`` (why it was stopped and what the nodes
    showed; "" when it ended by itself)."""

    rc: int | None
    output: str
    seconds: float
    started_t: float
    stopped: str = ""


#: Seconds between the two readings of the ranks' activity when a job is stopped.
ACTIVITY_S = 5.0


def _probe(hosts, nodes: list[str], script: str = "") -> dict[str, dict[str, str]]:
    out = {}
    for n in nodes:
        try:
            r = hosts[n].run(f"timeout 60 sh -c {shlex.quote(pressure.PROBE)} probe {shlex.quote(script)}")
            out[n] = pressure.parse(r.stdout)
        except Exception as exc:  # noqa: BLE001 - a node that does not answer is said so, the job still judged
            out[n] = {"error": str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}
    return out


def rank_nodes(hostlist: str) -> list[str]:
    """The node of each rank in order: ``node1:1,node2:2`` -> [node1, node2,
    node2] (horovodrun places ranks in the host list's order)."""
    out = []
    for item in hostlist.split(","):
        name, _, slots = item.partition(":")
        out += [name] * int(slots or 1)
    return out


def _launch(host, user: str, command: str, job: str) -> float:
    """Start ``command`` detached (its own session) as ``user``; return the
    node's clock at the start (epoch seconds)."""
    script = f"{command} > {JOB_DIR}/{job}.out 2>&1; echo $? > {JOB_DIR}/{job}.rc\n"
    encoded = base64.b64encode(script.encode()).decode()
    # The launch stands alone after ";": a list before "&" would go to the
    # background as one subshell that keeps the SSH session's output open.
    r = run_as(host, user, f"mkdir -p {JOB_DIR} && rm -f {JOB_DIR}/{job}.* && "
                           f"echo {encoded} | base64 -d > {JOB_DIR}/{job}.sh || exit 1; "
                           f"setsid bash {JOB_DIR}/{job}.sh < /dev/null > /dev/null 2>&1 & "
                           f"echo $! > {JOB_DIR}/{job}.sid; echo pid=$! t=$(date +%s.%N)", timeout_s=30)
    fields = dict(f.split("=", 1) for f in r.stdout.split() if "=" in f)
    if r.rc != 0 or "t" not in fields:
        raise RuntimeError(f"could not start {job} (exit {r.rc}): {(r.stderr or r.stdout).strip()[-300:]}")
    return float(fields["t"])


def _read(host, user: str, job: str, offset: int) -> tuple[str | None, int, float, str]:
    """(exit status or None while running, output size in bytes, the node's
    clock, the output's bytes from ``offset`` on)."""
    f = f"{JOB_DIR}/{job}"
    r = run_as(host, user, f"n=$(stat -c %s {f}.out 2>/dev/null || echo 0); "
                           f"printf 'rc=%s size=%s now=%s\\n' \"$(cat {f}.rc 2>/dev/null)\" \"$n\" \"$(date +%s.%N)\"; "
                           f"tail -c +{offset + 1} {f}.out 2>/dev/null | head -c $((n - {offset}))", timeout_s=60)
    head, _, body = r.stdout.partition("\n")
    fields = dict(f.split("=", 1) for f in head.split() if "=" in f)
    rc = fields.get("rc") or None
    return rc, int(fields.get("size") or offset), float(fields.get("now") or time.time()), body


def _stop(hosts, host, user: str, job: str, script: str, nodes: list[str]) -> None:
    """Stop the job: its session on the launching node (the session id
    :func:`_launch` kept), then whatever rank
    of ``script`` the training user still runs on each node (horovodrun's
    remote ranks outlive a killed ssh)."""
    sid = f"$(cat {JOB_DIR}/{job}.sid)"
    run_as(host, user, f"pkill -TERM -s {sid}; sleep 3; pkill -KILL -s {sid}; true", timeout_s=60)
    for n in dict.fromkeys(nodes):
        try:
            run_as(hosts[n], user, f"pkill -KILL -u $(id -u) -f {shlex.quote(script)}; true", timeout_s=60)
        except Exception:  # noqa: BLE001, S110 - a node that does not answer keeps its ranks; the failure says why
            pass


def _working(nodes: list[str], first: dict, second: dict) -> tuple[list[str], list[str], list[str]]:
    """(nodes whose ranks were still at work, nodes whose ranks waited,
    nodes whose rank processes are gone) between the two readings at the
    stop (:func:`refarch.pressure.still_working`)."""
    working, waiting, gone = [], [], []
    for n in dict.fromkeys(nodes):
        try:
            seconds = float(second[n]["t"]) - float(first[n]["t"])
        except (KeyError, ValueError):
            continue
        if second[n].get("rank_procs") == "0":
            gone.append(n)
            continue
        activity = pressure.rank_activity(first[n], second[n])
        if activity is not None:
            (working if pressure.still_working(activity, seconds) else waiting).append(
                f"{n} ({activity[0]:.2f} CPU, {activity[1]:,} major faults in {seconds:.0f} s, state {activity[2]})")
    return working, waiting, gone


def describe_stop(reason: str, seconds: float, ranks: dict[int, stall.RankProgress], missing: list[int],
                  nodes: list[str], before: dict, after: dict, at_stop: dict | None = None) -> str:
    """The failure of a stopped job in one line: when, why, the rank(s)
    behind with their node and progress, Horovod's missing ranks, and each
    node's :func:`refarch.pressure.diagnosis` (or that none shows any).

    When every rank got as far, the one behind is the rank whose process is
    gone, else the rank still at work while the others wait (``at_stop`` is
    the reading :data:`ACTIVITY_S` before ``after``), else the rank on the
    only node under memory or CPU pressure."""
    parts = [f"stopped {seconds:.0f} s after its start: {reason}"]
    names = list(dict.fromkeys(nodes))
    findings, pressed = [], []
    for n in names:
        if "error" in after.get(n, {}):
            findings.append(f"{n}: not read ({after[n]['error']})")
            continue
        found = pressure.diagnosis(before.get(n, {}), after.get(n, {}))
        findings += [f"{n}: {d}" for d in found]
        pressed += [n] if found else []
    behind = stall.slow_ranks(ranks, missing)
    working, waiting, gone = _working(nodes, at_stop or {}, after)
    where = ", ".join(sorted({p.where() for p in ranks.values()}))
    if behind:
        others = sorted({ranks[r].where() for r in ranks if r not in behind})
        parts.append("behind: " + ", ".join(f"rank {r} on {nodes[r]} ({ranks[r].where()})" for r in behind)
                     + (f"; the others at {', '.join(others)}" if others else ""))
    elif gone and len(gone) < len(names):
        parts.append(f"all ranks at {where}; behind: the rank on {', '.join(gone)} (its process is gone; "
                     "the others wait for it)")
    elif working and waiting:
        parts.append(f"all ranks at {where}; behind: the rank on " + ", ".join(working)
                     + "; waiting for it: " + ", ".join(waiting))
    elif len(pressed) == 1 and len(names) > 1:
        parts.append(f"all ranks at {where}; behind: the rank on {pressed[0]} (the only node under pressure)")
    if missing:
        parts.append("Horovod's stall check: missing rank(s) " + ", ".join(f"{r} on {nodes[r]}" for r in missing
                                                                           if r < len(nodes)))
    parts.append("; ".join(findings) if findings else "no node shows memory pressure or CPU throttling")
    return "; ".join(parts)


def watched_run(hosts, first: str, user: str, command: str, hostlist: str, script: str, job: str,
                watch: stall.JobWatch, limit_s: int) -> JobResult:
    """Run ``command`` (a horovodrun line) from node ``first`` as ``user``,
    watched; ``script`` is the workload's file name (its ranks are stopped by
    it), ``job`` a file-name-safe name of the job, ``limit_s`` the most
    seconds it may take.  Never raises for the job's own failure: the
    caller judges :class:`JobResult`.

    Raises:
        RuntimeError: the job could not be started.
    """
    nodes = rank_nodes(hostlist)
    world_size = len(nodes)
    distinct = list(dict.fromkeys(nodes))
    before = _probe(hosts, distinct)
    host = hosts[first]
    started = _launch(host, user, command, job)
    offset, text, now = 0, "", started
    try:
        while True:
            time.sleep(watch.poll_s)
            rc, offset_new, now, chunk = _read(host, user, job, offset)
            text += chunk
            offset = offset_new
            if rc is not None and rc.strip().lstrip("-").isdigit():
                return JobResult(int(rc), text, now - started, started)
            ranks = stall.parse_progress(text, world_size)
            reason = stall.stop_reason(ranks, started, now, watch)
            if reason is None and now - started >= limit_s:
                reason = f"ran past its limit of {limit_s} s"
            if reason is not None:
                break
    except BaseException:
        # Interrupted (SIGINT, a failed read): the detached job must not
        # outlive the watch on a kept cluster.
        _stop(hosts, host, user, job, script, nodes)
        raise
    missing = stall.horovod_missing_ranks(text)
    at_stop = _probe(hosts, distinct, script)
    time.sleep(ACTIVITY_S)
    after = _probe(hosts, distinct, script)
    _stop(hosts, host, user, job, script, nodes)
    _, _, _, chunk = _read(host, user, job, offset)
    text += chunk
    return JobResult(None, text, now - started, started,
                     describe_stop(reason, now - started, ranks, missing, nodes, before, after, at_stop))
