"""The elastic Horovod job of the availability properties, as a session
fixture (``elastic_runs``): mid-training a node fails (stopped, killed or
partitioned by the cloud driver), the failure is proven
(:func:`refarch.pytest.availability.prove_down`), the node is restored and
rejoins; the job's steps, timeline and decisions are its evidence
(``logs/availability-<mode>-<time>.json``).
"""

from __future__ import annotations

import json
import re
import threading
import time

import pytest

from ..judge import checks
from .availability import node_clock, node_healthy, prove_down, wait_until
from .hosts import HOROVOD_PYTHON, run_as
from .workloads import log_path, timed


def _steps(text: str) -> list[dict]:
    return checks.tagged(text, "REFARCH_STEP")


def step_resets(steps: list[dict]) -> list[tuple[int, int]]:
    """Where rank 0's step count went back after a reset: (the highest step
    trained before, the step it trained next), in the order seen; the
    restored state is the last commit, so the second is that commit's step."""
    resets, high, previous = [], -1, -1
    for entry in steps:
        if entry["step"] <= previous:
            resets.append((high, entry["step"]))
        high, previous = max(high, entry["step"]), entry["step"]
    return resets


def steps_repeated(steps: list[dict]) -> int:
    """The most steps trained twice after a reset: when rank 0's step count
    goes back from ``s`` to ``r`` (restored from the last commit), steps
    r..s were repeated (s - r + 1)."""
    return max((high - back + 1 for high, back in step_resets(steps)), default=0)


def worker_setting(host, user: str, until: str, name: str) -> str:
    """The value of environment variable ``name`` in a running worker of the
    elastic job whose until-file is ``until`` on ``host`` ("" when no worker
    runs there or it lacks the variable): what the ranks really got, after
    the launcher and horovodrun had their say."""
    r = run_as(host, user, f"for p in $(pgrep -u {user} -f -- '{_job_pattern(until)}'); do "
                           f"tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null | sed -n 's/^{name}=//p' | grep . "
                           "&& break; done", timeout_s=30)
    return r.stdout.strip().splitlines()[0] if r.stdout.strip() else ""


@pytest.fixture(scope="session")
def elastic_runs(cluster, hosts, profile, results):
    """``run(mode) -> dict``: the elastic job of :func:`elastic_job` for
    failure ``mode``, run once per session on first use (a failure is kept
    and raised again, not run twice)."""
    done: dict[str, dict | BaseException] = {}

    def run(mode: str) -> dict:
        if mode not in done:
            try:
                done[mode] = elastic_job(cluster, hosts, profile, results, mode)
            except BaseException as exc:  # pytest.fail included: the next property of the mode says the same
                done[mode] = exc
        if isinstance(done[mode], BaseException):
            raise done[mode]
        return done[mode]

    return run


def elastic_job(cluster, hosts, profile, results, mode: str = "stop") -> dict:
    """The elastic job of failure ``mode`` (:class:`ElasticJob`), run."""
    return ElasticJob(cluster, hosts, profile, results, mode).run()


class ElasticJob:
    """Elastic Horovod across all nodes (``horovodrun-elastic``, hosts from
    the shared hosts file); mid-training the last node fails as ``mode``
    says (:data:`refarch.clouds.drivers.FAILURE_MODES`: stopped, killed or cut off
    by the cloud driver) while it is still listed (a failure, not a
    scale-down), the failure proven (:func:`prove_down`), then it is
    restored; it stays listed throughout, and the launcher's blacklist
    cooldown lets it back in.  The job is ended once it trains at full size
    again (or, when the node never rejoins, after
    ``availability.step_timeout_s``).

    Before recovery is timed the job must have seen the failure: a line of
    :data:`refarch.judge.checks.FAILURE_SEEN` in its output (``failure_seen``)
    and a step at world size N-1 after the stop.  :meth:`run` returns
    recovery_s (stop -> first step at N-1), rejoin_s (node healthy again ->
    first step at N; None and ``rejoin_error`` when it never came), the
    world sizes seen, the steps repeated, the job's result and
    ``timeline``: the events on the first node's clock, seconds after the
    failure (failed, proven, first step at N-1, restored, healthy, first
    step at N) with the driver's decisions from the job's output; also
    written to ``logs/availability-<mode>-<time>.json``.

    The steps, in order: :meth:`start`, :meth:`trains_at_full_size`,
    :meth:`fail_victim`, :meth:`goes_on_without_it`, :meth:`restore_victim`,
    :meth:`takes_it_back`, :meth:`end` (always), :meth:`result`.
    """

    def __init__(self, cluster, hosts, profile, results, mode: str = "stop"):
        self.cluster, self.hosts, self.profile, self.results, self.mode = cluster, hosts, profile, results, mode
        self.names = cluster.contract.node_names
        self.n, self.first, self.victim = len(self.names), self.names[0], self.names[-1]
        self.settings, self.user = profile.availability, profile.training_user.name
        self.mount = cluster.contract.shared_storage["mount_point"]
        self.stamp = int(time.time())
        self.what = {"stop": "stopped", "kill": "killed", "partition": "cut off"}[mode]
        self.events: list[tuple[str, float]] = []
        token = f"{cluster.run_id}-{self.stamp}"
        self.hosts_file = f"{self.mount}/.horovod/elastic-hosts"
        self.until = f"{self.mount}/.horovod/refarch-elastic-done-{token}"
        self.log = f"/tmp/refarch-elastic-{token}.log"
        self.node1 = hosts[self.first]
        # Each elastic job keeps its own evidence: a fault case's job in the
        # same run must not overwrite the property's log.
        self.local_log = log_path(cluster, f"elastic-{mode}-{self.stamp}.log")
        self.box: dict = {}
        self.job: threading.Thread | None = None
        self.failed, self.rejoin_error, self.down_s, self.gloo_timeout = False, "", None, ""
        self.t_stop = self.t_back = 0.0
        self.shrunk: dict | None = None
        self.grown: dict | None = None
        self.left: list[str] = []
        self.text = ""
        original = run_as(self.node1, self.user, f"cat {self.hosts_file}", timeout_s=30).stdout
        self.slots = {line.split(":")[0]: line for line in original.split() if ":" in line}

    # What the job shows ----------------------------------------------------
    def listing(self, members: list[str]) -> None:
        """Write the shared hosts file the elastic driver discovers from."""
        text = "\\n".join(self.slots.get(m, f"{m}:1") for m in members)
        run_as(self.node1, self.user, f"printf '{text}\\n' > {self.hosts_file}.new && "
                                      f"mv {self.hosts_file}.new {self.hosts_file}", timeout_s=30)

    def read_log(self) -> str:
        return run_as(self.node1, self.user, f"cat {self.log} 2>/dev/null", timeout_s=30).stdout

    def cause(self) -> str:
        text = self.read_log()
        return f": {checks.cause_line(text) or 'the job printed nothing'} (full output: {self.local_log})"

    def still_training(self) -> str:
        steps = _steps(self.read_log())
        if not steps or steps[-1]["t"] <= self.t_back:
            return self.cause()
        last = steps[-1]
        return (f"; it trains on at world size {last['size']} (step {last['step']}), so {self.victim} was never "
                "taken back (Horovod blacklists a failed host for good unless --blacklist-cooldown-range is given)")

    def survivors_wait(self) -> str:
        """Where the survivors wait when the job does not go on: Gloo's
        timeout in their output, and the driver's SSH session to the victim
        (Horovod takes a host as failed only when that session ends)."""
        text, parts, user, victim = self.read_log(), [], self.user, self.victim
        gloo = next((line.strip() for line in text.splitlines() if "Timed out waiting" in line), "")
        if gloo:
            parts.append(f"the survivors' collective timed out ({gloo[gloo.find('Timed out'):][:90]}) and they "
                         "wait for the driver")
        session = run_as(self.node1, user, f"pgrep -u {user} -af '{_not_self(f'StrictHostKeyChecking=no {victim} ')}'",
                         timeout_s=30)
        if session.rc == 0 and session.stdout.strip():
            alive = run_as(self.node1, user, f"ssh -G {victim} | grep -E '^(serveraliveinterval|serveralivecountmax) '",
                           timeout_s=30).stdout.split()
            parts.append(f"the elastic driver on {self.first} still waits on its SSH session to {victim} (the one "
                         f"that launched its worker; {' '.join(alive) or 'no ServerAlive settings'}): Horovod takes "
                         "a host as failed only when that session ends")
        return (": " + "; ".join(parts) + f" (full output: {self.local_log})") if parts else self.cause()

    def step_where(self, cond) -> dict | None:
        return next((s for s in _steps(self.read_log()) if cond(s)), None)

    # The steps -------------------------------------------------------------
    def start(self) -> None:
        """List every node and launch the job in a thread."""
        a, n = self.settings, self.n
        script = (f"{HOROVOD_PYTHON} $(dirname $(command -v horovodrun))/elastic_train.py --until-file {self.until}"
                  f" --commit-every {a.commit_every} --step-sleep {a.step_sleep_s}")
        cmd = (f"cd /tmp && horovodrun-elastic --min-np {n - 1} --max-np {n} -np {n}"
               f" --start-timeout {self.profile.smoke.start_timeout_s} {script} > {self.log} 2>&1")
        self.job = threading.Thread(target=lambda: self.box.update(
            r=run_as(self.node1, self.user, cmd, timeout_s=a.job_timeout_s)), daemon=True)
        self.listing(self.names)
        self.job.start()

    def trains_at_full_size(self) -> None:
        """Wait for two commits' worth of steps at world size N."""
        wait_until(f"elastic job trains at world size {self.n}", lambda: self.step_where(
            lambda s: s["size"] == self.n and s["step"] >= 2 * self.settings.commit_every),
            self.settings.step_timeout_s, on_timeout=self.cause)

    def fail_victim(self) -> None:
        """The victim fails while listed (the survivors must notice), proven."""
        self.gloo_timeout = worker_setting(self.node1, self.user, self.until, "HOROVOD_GLOO_TIMEOUT_SECONDS")
        self.t_stop = node_clock(self.node1)
        self.events.append(("failed", self.t_stop))
        self.failed = True
        self.cluster.driver.fail_node(self.cluster.context, self.victim, self.mode)
        self.down_s = prove_down(self.cluster, self.hosts, self.victim, mode=self.mode)
        self.events.append(("failure proven", node_clock(self.node1)))

    def goes_on_without_it(self) -> None:
        """Wait for the first step at world size N-1 after the failure."""
        n = self.n
        self.shrunk = wait_until(f"elastic job goes on at world size {n - 1} after {self.victim} was {self.what}",
                                 lambda: self.step_where(lambda s: s["size"] == n - 1 and s["t"] > self.t_stop),
                                 self.settings.step_timeout_s, on_timeout=self.survivors_wait)
        self.events.append((f"first step at world size {n - 1}", self.shrunk["t"]))

    def restore_victim(self) -> None:
        """Restore the victim and wait until it is healthy."""
        self.events.append(("restored", node_clock(self.node1)))
        self.cluster.driver.restore_node(self.cluster.context, self.victim, self.mode)
        self.failed = False
        wait_until(f"{self.victim} healthy after it was restored",
                   lambda: node_healthy(self.cluster.context, self.victim, self.mount), self.settings.restart_timeout_s)
        self.t_back = node_clock(self.node1)
        self.events.append(("healthy", self.t_back))

    def takes_it_back(self) -> None:
        """Wait for the first step at world size N after the victim is back.
        A node that never rejoins fails the rejoin property only: the job is
        still ended and the recovery measured."""
        again = "started again" if self.mode != "partition" else "reconnected"
        try:
            self.grown = wait_until(f"elastic job back at world size {self.n} after {self.victim} was {again}",
                                    lambda: self.step_where(lambda s: s["size"] == self.n and s["t"] > self.t_back),
                                    self.settings.step_timeout_s, on_timeout=self.still_training)
            self.events.append((f"first step at world size {self.n}", self.grown["t"]))
        except pytest.fail.Exception as exc:
            self.grown, self.rejoin_error = None, str(exc)
        run_as(self.node1, self.user, f"touch {self.until}", timeout_s=30)
        self.job.join(self.settings.job_timeout_s)

    def end(self) -> None:
        """Whatever happened: the victim restored, the job stopped, its
        leftovers killed, every node listed again, its output kept."""
        user, until = self.user, self.until
        if self.failed:  # never leave a node down or cut off for the next checks
            self.cluster.driver.restore_node(self.cluster.context, self.victim, self.mode)
        if self.job is not None and self.job.is_alive():
            # The launcher and its workers all carry this job's until-file on
            # their command line: asked to stop, then killed.  (A launcher
            # waiting on a lost host's SSH session outlived a plain SIGTERM
            # and held its rendezvous port for an hour.)
            run_as(self.node1, user, f"touch {until}; sleep 20; pkill -u {user} -f -- '{_job_pattern(until)}'; "
                   f"sleep 5; pkill -KILL -u {user} -f -- '{_job_pattern(until)}'", timeout_s=60)
            self.job.join(60)
        self.left = _kill_leftovers(self.hosts, self.names, user, until)
        self.listing(self.names)
        self.text = self.read_log()
        if self.local_log is not None:
            self.local_log.write_text(self.text, encoding="utf-8")
        run_as(self.node1, user, f"rm -f {until} {self.log}", timeout_s=30)

    def result(self) -> dict:
        """The figures and evidence of an ended job; fails when processes
        outlived it, it did not finish, or its output shows no failure."""
        text, local_log, n = self.text, self.local_log, self.n
        if self.left:
            pytest.fail(f"the elastic job's processes outlived it (killed now): {'; '.join(self.left)} "
                        f"(full output: {local_log})")
        r = self.box.get("r")
        if r is None or r.rc != 0:
            pytest.fail(f"elastic job did not finish (exit {getattr(r, 'rc', '?')}): "
                        f"{checks.cause_line(text) or 'it printed nothing'} (full output: {local_log})")
        steps = _steps(text)
        sizes = [s["size"] for i, s in enumerate(steps) if i == 0 or s["size"] != steps[i - 1]["size"]]
        failure_seen = checks.failure_evidence(text)
        if not failure_seen:
            pytest.fail(f"the elastic job went on at world size {n - 1} after {self.victim} was {self.what}, but its "
                        "output shows no failure of a worker (no exit status, closed connection or blacklisted "
                        f"host): it did not notice the failure it is timed on (full output: {local_log})")
        grown = self.grown
        run = {"world_sizes": sizes, "recovery_s": round(self.shrunk["t"] - self.t_stop, 2),
               "down_after_stop_s": round(self.down_s, 1), "failure_seen": failure_seen,
               "rejoin_s": round(grown["t"] - self.t_back, 2) if grown else None, "rejoin_error": self.rejoin_error,
               "steps_repeated": steps_repeated(steps), "step_resets": step_resets(steps),
               "gloo_timeout_s": float(self.gloo_timeout) if self.gloo_timeout else None,
               "steps": len(steps), "result": checks.parse_training_result(text), "victim": self.victim,
               "log": str(local_log), "mode": self.mode,
               "timeline": timeline(self.events, self.t_stop, text)}
        evidence = log_path(self.cluster, f"availability-{self.mode}-{self.stamp}.json")
        if evidence is not None:
            evidence.write_text(json.dumps(run, indent=2), encoding="utf-8")
            run["evidence"] = str(evidence)
        self.results.availability["elastic" if self.mode == "stop" else f"elastic_{self.mode}"] = run
        return run

    def run(self) -> dict:
        """Every step in order, the end whatever happens; the result."""
        with timed(self.results, "availability"):
            try:
                self.start()
                self.trains_at_full_size()
                self.fail_victim()
                self.goes_on_without_it()
                self.restore_victim()
                self.takes_it_back()
            finally:
                self.end()
        return self.result()


def _not_self(text: str) -> str:
    """pgrep/pkill -f pattern for the literal ``text`` that does not match
    itself: the shell that runs pgrep has the pattern on its own command
    line, so ``[x]rest`` (still matching "xrest") keeps it out."""
    return f"[{text[0]}]{text[1:]}"


def _job_pattern(until: str) -> str:
    """pgrep/pkill -f pattern of an elastic job's processes: its until-file
    option (:func:`_not_self`)."""
    return _not_self(f"--until-file {until}")


def _kill_leftovers(hosts, names: list[str], user: str, until: str) -> list[str]:
    """Kill every process of ``user`` whose command line names the elastic
    job's ``until`` file on any of ``names`` (SIGKILL); returns
    "<node>: <pid> <command>" for each one found.  A node that does not
    answer (still booting after a kill) is passed over: it has no process of
    the job."""
    found = []
    for name in names:
        try:
            r = run_as(hosts[name], user, f"pgrep -u {user} -af -- '{_job_pattern(until)}' "
                                          f"&& pkill -KILL -u {user} -f -- '{_job_pattern(until)}'", timeout_s=30)
        except Exception:  # noqa: BLE001 - unreachable node: nothing of the job runs there
            continue
        found += [f"{name}: {line.strip()[:160]}" for line in r.stdout.splitlines() if line.strip()]
    return found


#: Lines of an elastic job's output that show what the driver and the
#: workers decided after a failure (worker exits, Gloo's timeouts and resets,
#: blacklisting, resets and new rendezvous).
DECISION = re.compile(r"Process \d+ exit with status code|closed by remote host|Connection (?:closed|reset)|"
                      r"[Bb]lacklist|Timed out waiting|HorovodInternalError|reset workers|rendezvous|"
                      r"all \d+ workers recorded|record state")


#: The build folder Horovod's messages name their sources by
#: (``/tmp/pip-wheel-x/horovod_<hash>/``): left out of the decisions.
BUILD_PATH = re.compile(r"/tmp/pip-wheel-[^/\s]+/horovod_[0-9a-f]+/")


def timeline(events: list[tuple[str, float]], t0: float, output: str, limit: int = 20) -> dict:
    """The availability timeline: ``events`` (name, epoch seconds on one
    node's clock) as seconds after ``t0`` (the failure), in time order, and
    up to ``limit`` lines of the job's ``output`` matching :data:`DECISION`
    (without :data:`BUILD_PATH`, stripped, 200 characters at most)."""
    decisions = [BUILD_PATH.sub("", line).strip()[:200] for line in output.splitlines()
                 if DECISION.search(line)][:limit]
    return {"events": [{"event": name, "t_s": round(t - t0, 2)} for name, t in sorted(events, key=lambda e: e[1])],
            "decisions": decisions}
