"""A run of the suite's CI (``ci/test.sh``, ``python -m refarch.ci run``):
the change tier, then the heavy tier within the budget.

The change tier runs every time: its ``lane`` environments at once, each in
a process group of its own with its output in ``runs/ci-logs/ENV.log``
(printed when they end), then the others one after another on a quiet
machine.  Then each heavy environment is reused when its pass is honoured
(:func:`refarch.ci.reuse.standing`: said with the run, tree and key it
was reused from), or tried in the order of :mod:`.schedule`, started only
when its expected seconds fit what is left of the budget, and stopped
when it runs on past the budget plus the margin less :data:`KILL_AFTER_S`
(SIGTERM: it tears down), killed at the budget plus the margin (SIGKILL):
a run never ends past the budget plus the margin.  ``--all`` runs every
environment whatever the records and the budget; ``--only ENV`` the named
ones.

Every environment that ran leaves a record (:func:`refarch.ci.reuse.remember`)
and a row in ``runs/ci-timings.json``: seconds, when it started, exit, how
busy the machine's CPUs were meanwhile (/proc/stat), what was done with it
(ran, retried, reused, pending, stopped) and why; the pending ones are listed at the
end with their last pass.  Exit: 0 when every environment that ran passed
(pending ones do not fail a run), 1 otherwise, 130 when interrupted.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import version
from ..paths import ROOT, runs_dir
from ..retry import Retryable, classify
from . import reuse, schedule
from .environments import Definitions, Environment

#: Seconds a stopped environment has to tear down before it is killed
#: (tox.ini's interrupt_timeout).
KILL_AFTER_S = 300

#: Failures after which a whole environment is run once more, kept as data
#: as the playbook's are (:mod:`refarch.retry`): every one of its JUnit
#: failures must match.
ENVIRONMENT_RETRYABLE: tuple[Retryable, ...] = (
    Retryable(
        "unjudged-figure",
        r"cannot be judged \(an error, never a pass\)",
        "a figure could not be judged (the machine's speed changed while it was measured: a shared machine); "
        "measured again on a new cluster, as a person would, and an error again fails", attempts=2, wait_s=0),
)


def cpu_ticks() -> tuple[int, int]:
    """``(busy, total)`` jiffies of all CPUs since boot (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6]
    return busy, busy + fields[3] + fields[4] + (fields[7] if len(fields) > 7 else 0)


def busy_share(t0: tuple[int, int], t1: tuple[int, int]) -> float | None:
    """Share of the machine's CPU time that was busy between two
    :func:`cpu_ticks` (every process on the machine)."""
    return round((t1[0] - t0[0]) / (t1[1] - t0[1]), 2) if t1[1] > t0[1] else None


def command(env: Environment, logs: Path, extra: list[str]) -> list[str]:
    """``ci/tox -e TOX -- ARGS`` of ``env``: its selection, its own
    arguments, and for pytest environments a JUnit file in ``logs`` and the
    run's extra pytest arguments."""
    junit = [f"--junitxml={logs / (env.name.replace(':', '_') + '.junit.xml')}"] if env.junit else []
    return [str(ROOT / "ci" / "tox"), "-e", env.tox, "--", *env.pytest, *env.args, *junit,
            *(extra if env.junit else [])]


@dataclass
class Row:
    """One environment in a run (a row of runs/ci-timings.json)."""

    name: str
    tier: str
    action: str
    why: str = ""
    seconds: float = 0.0
    started_s: float | None = None
    exit: int | None = None
    cpu_busy: float | None = None
    lane: bool = False
    expected_s: float | None = None
    key: str = ""
    last_pass: str = ""

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None and v != "" and v is not False}


@dataclass
class Run:
    """A run of ci/test.sh: its definitions, start (epoch seconds, the
    bootstrap's start), budget and state."""

    defs: Definitions
    started: float
    budget_s: float
    extra: list[str]
    run_id: str = field(default_factory=lambda: time.strftime("ci-%Y%m%d-%H%M%S"))
    rows: list[Row] = field(default_factory=list)
    running: dict[int, subprocess.Popen] = field(default_factory=dict)
    interrupted: str = ""

    @property
    def logs(self) -> Path:
        path = runs_dir() / "ci-logs"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def left_s(self) -> float:
        return self.started + self.budget_s - time.time()

    def stop_all(self, signame: str) -> None:
        """Stop what runs (SIGTERM: each tears down); a second signal kills it."""
        again = bool(self.interrupted)
        self.interrupted = signame
        for proc in list(self.running.values()):
            _signal_group(proc, signal.SIGKILL if again else signal.SIGTERM)

    def start(self, env: Environment, to_log: bool) -> tuple[subprocess.Popen, Path, dict]:
        """Start ``env`` in a process group of its own; returns the process,
        its loaded-modules file and its key's parts known before it runs."""
        modules = self.logs / f"{env.name.replace(':', '_')}.modules"
        modules.unlink(missing_ok=True)
        junit = self.logs / f"{env.name.replace(':', '_')}.junit.xml"
        junit.unlink(missing_ok=True)
        before = {"inputs": reuse.input_hashes(env, ROOT), "tools": reuse.tool_versions(env, ROOT),
                  "modules": reuse.all_module_hashes(ROOT)}
        out = open(self.logs / f"{env.name}.log", "w", encoding="utf-8") if to_log else None  # noqa: SIM115
        proc = subprocess.Popen(command(env, self.logs, self.extra), cwd=ROOT, start_new_session=True,
                                stdout=out, stderr=subprocess.STDOUT if out else None,
                                env={**os.environ, "REFARCH_LOADED_MODULES": str(modules),
                                     # This record is the reuse: a role scenario runs, so its modules are listed.
                                     "REFARCH_ROLES_REUSE": "0"})
        if out:
            out.close()
        self.running[proc.pid] = proc
        if self.interrupted:  # a signal came while it was being started
            _signal_group(proc, signal.SIGTERM)
        return proc, modules, before

    def finish(self, env: Environment, row: Row, proc: subprocess.Popen, modules: Path, before: dict,
               t0: float, cpu0: tuple[int, int], stopped: bool) -> None:
        """Fill ``row`` from the ended ``proc`` and record the outcome."""
        self.running.pop(proc.pid, None)
        row.seconds = round(time.time() - t0, 1)
        row.exit = proc.returncode
        row.cpu_busy = busy_share(cpu0, cpu_ticks())
        if self.interrupted and not stopped:
            row.action, row.why = "interrupted", f"SIG{self.interrupted}"
            return
        from ..tools import rolecache

        listed = sorted(rolecache.loaded_modules(modules))
        hashes = {rel: before["modules"].get(rel, "missing")
                  for rel in rolecache.module_hashes(listed, ROOT)}  # as they were when it started
        key = reuse.Key(before["inputs"], hashes, before["tools"], rolecache.machine_id())
        verdict = "stopped" if stopped else "passed" if proc.returncode == 0 else "failed"
        # Its key is complete only when a process of the suite listed its modules (the CLI or the pytest
        # plugin: every environment loads one), and it ran whole: extra pytest arguments narrow it.
        reusable = (bool(set(rolecache.ALWAYS_LOADED) & set(listed)) or "." in env.inputs) \
            and not (self.extra and env.junit)
        record = reuse.remember(env.name, key, verdict, row.seconds, self.run_id, version.commit(),
                                self.logs / f"{env.name.replace(':', '_')}.junit.xml", reusable=reusable)
        row.key = record["key"][:12]
        if stopped:
            row.action = "stopped"
            row.why = f"ran past the budget ({self.budget_s:.0f} s after the start): stopped, pending"
        elif not reusable and verdict == "passed":
            row.why = ("ran with extra pytest arguments" if self.extra and env.junit else
                       "its processes listed no modules of the package") + ": not reused next time"


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def junit_failures(path: Path) -> list[str]:
    """The text (message and body) of every failure and error in JUnit file
    ``path``; empty when there is none or no file."""
    import xml.etree.ElementTree as ET

    try:
        tree = ET.parse(path)
    except (OSError, ET.ParseError):
        return []
    return [f"{el.get('message', '')}\n{el.text or ''}" for el in tree.iter() if el.tag in ("failure", "error")]


def run_one(run: Run, env: Environment, row: Row, deadline: float | None = None) -> None:
    """Run ``env`` alone, its output on this process's; stopped at
    ``deadline`` (epoch seconds) when given.  A failed attempt whose every
    JUnit failure is retryable (:data:`ENVIRONMENT_RETRYABLE`)
    is run again, up to the rule's attempts, saying the rule and why; the
    failed attempt's row says ``retried``."""
    for attempt in range(1, 1 + max(r.attempts for r in ENVIRONMENT_RETRYABLE)):
        _attempt(run, env, row, deadline)
        if row.action != "ran" or row.exit == 0 or not env.junit or run.interrupted:
            return
        junit = run.logs / f"{env.name.replace(':', '_')}.junit.xml"
        rule = classify(junit_failures(junit), ENVIRONMENT_RETRYABLE)
        if rule is None or attempt >= rule.attempts:
            return
        print(f"ci/test.sh: {env.name}: attempt {attempt} of {rule.attempts} failed ({rule.id}: {rule.reason}): "
              "running it again", flush=True)
        row.action, row.why = "retried", f"attempt {attempt} failed: {rule.id}"
        row = Row(env.name, env.tier, "ran", why=f"attempt {attempt + 1} after {rule.id}", lane=row.lane,
                  expected_s=row.expected_s, last_pass=row.last_pass)
        run.rows.append(row)


def _attempt(run: Run, env: Environment, row: Row, deadline: float | None) -> None:
    t0, cpu0 = time.time(), cpu_ticks()
    row.started_s = round(t0 - run.started, 1)
    print(f"ci/test.sh: {env.name} ({env.tier} tier" + (f"; {row.why}" if row.why else "") + ")", flush=True)
    proc, modules, before = run.start(env, to_log=False)
    stopped = False
    while proc.poll() is None:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        now = time.time()
        if deadline is not None and not stopped and now > deadline:
            print(f"ci/test.sh: {env.name} ran past the budget plus its margin: stopping it (it tears down)",
                  flush=True)
            _signal_group(proc, signal.SIGTERM)
            stopped = True
            deadline = now + min(KILL_AFTER_S, run.defs.margin_s)
        elif stopped and now > deadline:
            _signal_group(proc, signal.SIGKILL)
    if stopped:  # what it left in its process group goes with it
        _signal_group(proc, signal.SIGKILL)
    run.finish(env, row, proc, modules, before, t0, cpu0, stopped)


def run_lanes(run: Run, envs: list[Environment]) -> None:
    """The ``envs`` at once, each with its output in runs/ci-logs/ENV.log,
    printed when all have ended."""
    print(f"ci/test.sh: at once: {' '.join(e.name for e in envs)} (output in {run.logs}/, printed when they end)",
          flush=True)
    started = []
    for env in envs:
        row = Row(env.name, env.tier, "ran", lane=True)
        run.rows.append(row)
        t0, cpu0 = time.time(), cpu_ticks()
        row.started_s = round(t0 - run.started, 1)
        started.append((env, row, *run.start(env, to_log=True), t0, cpu0))
    for env, row, proc, modules, before, t0, cpu0 in started:
        while proc.poll() is None:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        run.finish(env, row, proc, modules, before, t0, cpu0, stopped=False)
    for env, *_ in started:
        print(f"=================== ci/test.sh: output of {env.name} ===================", flush=True)
        sys.stdout.write((run.logs / f"{env.name}.log").read_text(encoding="utf-8", errors="replace"))
        sys.stdout.flush()


def change_tier(run: Run, envs: list[Environment]) -> None:
    lanes = [e for e in envs if e.lane]
    if len(lanes) > 1:
        run_lanes(run, lanes)
    for env in envs:
        if run.interrupted:
            return
        if env.lane and len(lanes) > 1:
            continue
        row = Row(env.name, env.tier, "ran")
        run.rows.append(row)
        run_one(run, env, row)


def heavy_tier(run: Run, envs: list[Environment], run_all: bool) -> None:
    measured = {r.name: r.seconds for r in run.rows if r.tier == "change" and r.exit is not None}
    scale = schedule.machine_scale(measured, run.defs.tier("change"))
    heavy = [(env, reuse.standing(env, run.defs.max_age_s, ROOT)) for env in envs]
    reused, tried = schedule.candidates(heavy, run_all)
    for d in reused:
        stand = dict(heavy)[d.env]
        run.rows.append(Row(d.env.name, "heavy", "reused", key=stand.reusable["key"][:12],
                            why=f"reused: {reuse.describe_pass(stand.reusable)}, inputs unchanged"))
        print(f"ci/test.sh: {d.env.name}: {run.rows[-1].why}", flush=True)
    for env, stand in tried:
        if run.interrupted:
            break
        decision = schedule.decide(env, stand, run.left_s(), scale, run_all)
        changed = f" ({', '.join(stand.changed[:4])}{', ...' if len(stand.changed) > 4 else ''})" if stand.changed else ""
        row = Row(env.name, "heavy", "ran" if decision.action == "run" else "pending", why=decision.why + changed,
                  expected_s=round(decision.expected_s, 1), last_pass=reuse.describe_pass(stand.last))
        run.rows.append(row)
        if decision.action == "run":
            run_one(run, env, row, None if run_all else
                    run.started + run.budget_s + max(run.defs.margin_s - KILL_AFTER_S, 0))


def write_timings(run: Run, cpu0: tuple[int, int], path: Path) -> dict:
    """runs/ci-timings.json of ``run`` (module docstring)."""
    total = time.time() - run.started
    busy_s = (cpu_ticks()[0] - cpu0[0]) / os.sysconf("SC_CLK_TCK")
    cpus = os.cpu_count() or 1
    out = {"what": "ci/test.sh: each environment's tier, what was done with it (ran, reused, pending, stopped) "
                   "and why, seconds (wall clock), when it started (seconds after the bootstrap began), exit "
                   "status, how busy the machine's CPUs were meanwhile (0-1, /proc/stat); cpu_busy_s: busy CPU "
                   "seconds of the whole run, cpu_floor_s: those over the CPUs, the least wall time of this work here",
           "run": run.run_id, "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "host": platform.node(), "cpus": cpus, "commit": version.commit(), "budget_s": run.budget_s,
           "margin_s": run.defs.margin_s, "total_s": round(total, 1), "interrupted": run.interrupted or None,
           "cpu_busy_s": round(busy_s, 1), "cpu_floor_s": round(busy_s / cpus, 1),
           "environments": [r.as_dict() for r in run.rows],
           "pending": [{"name": r.name, "why": r.why, "last_pass": r.last_pass} for r in run.rows
                       if r.action in ("pending", "stopped")]}
    path.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return out


def summary(run: Run, out: dict) -> str:
    lines = ["", "ci/test.sh timings (runs/ci-timings.json):"]
    for r in run.rows:
        if r.action in ("ran", "retried", "stopped", "interrupted"):
            state = "ok" if r.exit == 0 and r.action == "ran" else r.action.upper() if r.action != "ran" \
                else f"FAILED (exit {r.exit})"
            state += f" ({r.why})" if r.action == "retried" else ""
            lines.append(f"  {r.name:<22} {r.tier:<6} {r.seconds:>7.1f} s  {state}"
                         + (f"  (CPUs {100 * r.cpu_busy:.0f} % busy)" if r.cpu_busy is not None else "")
                         + ("  (beside the others of its tier)" if r.lane else ""))
        elif r.action == "reused":
            lines.append(f"  {r.name:<22} {r.tier:<6}          {r.why}")
    lines.append(f"  {'total':<29} {out['total_s']:>7.1f} s ({out['total_s'] / 60:.1f} min; budget "
                 f"{run.budget_s:.0f} s + margin {run.defs.margin_s:.0f} s)"
                 + (f", interrupted by SIG{run.interrupted}" if run.interrupted else ""))
    lines.append(f"  {'CPU time':<29} {out['cpu_busy_s']:>7.1f} s busy on {out['cpus']} CPUs: at least "
                 f"{out['cpu_floor_s'] / 60:.1f} min of wall time for this work here, however arranged")
    pending = [r for r in run.rows if r.action in ("pending", "stopped")]
    if pending:
        lines.append(f"ci/test.sh: pending ({len(pending)}; a later run picks them up, `ci/test.sh --all` runs "
                     "everything):")
        lines += [f"  {r.name}: {r.why}; last pass: {r.last_pass}" for r in pending]
    return "\n".join(lines)


def execute(defs: Definitions, started: float, budget_s: float, extra: list[str], only: list[str],
            run_all: bool, bootstrap_s: float | None = None) -> int:
    """The whole run (module docstring); returns the exit status."""
    run = Run(defs, started, budget_s, extra)
    if bootstrap_s is not None:
        run.rows.append(Row("bootstrap", "change", "ran", seconds=round(bootstrap_s, 1), started_s=0.0, exit=0))
    cpu0 = cpu_ticks()
    for signame in ("TERM", "INT"):
        signal.signal(getattr(signal, f"SIG{signame}"), lambda *_a, s=signame: run.stop_all(s))
    if only:
        for env in [defs.get(n) for n in only]:
            if run.interrupted:
                break
            run.rows.append(Row(env.name, env.tier, "ran", why="--only"))
            run_one(run, env, run.rows[-1])
    else:
        change_tier(run, defs.tier("change"))
        if not run.interrupted:
            heavy_tier(run, defs.tier("heavy"), run_all)
    out = write_timings(run, cpu0, runs_dir() / "ci-timings.json")
    print(summary(run, out), flush=True)
    failed = [r for r in run.rows if r.action == "ran" and r.exit != 0]
    for r in failed:
        log = run.logs / f"{r.name}.log"
        if r.lane and log.is_file():
            print(f"=================== ci/test.sh: FAILED {r.name}: the last 40 lines of {log} ===================")
            print("\n".join(line[:400] for line in log.read_text(errors="replace").splitlines()[-40:]))
    if run.interrupted:
        return 130
    if failed:
        print(f"ci/test.sh: FAILED: {' '.join(r.name for r in failed)}", file=sys.stderr)
        return 1
    return 0
