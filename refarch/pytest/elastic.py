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
    and a step at world size N-1 after the stop.  Returns recovery_s (stop
    -> first step at N-1), rejoin_s (node healthy again -> first step at N;
    None and ``rejoin_error`` when it never came), the world sizes seen,
    the steps repeated, the job's result and ``timeline``: the events on
    the first node's clock, seconds after the failure (failed, proven,
    first step at N-1, restored, healthy, first step at N) with the driver's
    decisions from the job's output; also written to
    ``logs/availability-<mode>-<time>.json``."""
    names = cluster.contract.node_names
    n, first, victim = len(names), names[0], names[-1]
    a, user = profile.availability, profile.training_user.name
    mount = cluster.contract.shared_storage["mount_point"]
    stamp = int(time.time())
    what = {"stop": "stopped", "kill": "killed", "partition": "cut off"}[mode]
    events: list[tuple[str, float]] = []
    token = f"{cluster.run_id}-{stamp}"
    hosts_file, until = f"{mount}/.horovod/elastic-hosts", f"{mount}/.horovod/refarch-elastic-done-{token}"
    log = f"/tmp/refarch-elastic-{token}.log"
    node1 = hosts[first]
    original = run_as(node1, user, f"cat {hosts_file}", timeout_s=30).stdout
    slots = {line.split(":")[0]: line for line in original.split() if ":" in line}

    def listing(members):
        text = "\\n".join(slots.get(m, f"{m}:1") for m in members)
        run_as(node1, user, f"printf '{text}\\n' > {hosts_file}.new && mv {hosts_file}.new {hosts_file}", timeout_s=30)

    def read_log() -> str:
        return run_as(node1, user, f"cat {log} 2>/dev/null", timeout_s=30).stdout

    def cause() -> str:
        text = read_log()
        return f": {checks.cause_line(text) or 'the job printed nothing'} (full output: {local_log})"

    def still_training() -> str:
        steps = _steps(read_log())
        if not steps or steps[-1]["t"] <= t_back:
            return cause()
        last = steps[-1]
        return (f"; it trains on at world size {last['size']} (step {last['step']}), so {victim} was never "
                "taken back (Horovod blacklists a failed host for good unless --blacklist-cooldown-range is given)")

    def survivors_wait() -> str:
        """Where the survivors wait when the job does not go on: Gloo's
        timeout in their output, and the driver's SSH session to the victim
        (Horovod takes a host as failed only when that session ends)."""
        text, parts = read_log(), []
        gloo = next((line.strip() for line in text.splitlines() if "Timed out waiting" in line), "")
        if gloo:
            parts.append(f"the survivors' collective timed out ({gloo[gloo.find('Timed out'):][:90]}) and they "
                         "wait for the driver")
        session = run_as(node1, user, f"pgrep -u {user} -af '{_not_self(f'StrictHostKeyChecking=no {victim} ')}'", timeout_s=30)
        if session.rc == 0 and session.stdout.strip():
            alive = run_as(node1, user, f"ssh -G {victim} | grep -E '^(serveraliveinterval|serveralivecountmax) '",
                           timeout_s=30).stdout.split()
            parts.append(f"the elastic driver on {first} still waits on its SSH session to {victim} (the one that "
                         f"launched its worker; {' '.join(alive) or 'no ServerAlive settings'}): Horovod takes a "
                         "host as failed only when that session ends")
        return (": " + "; ".join(parts) + f" (full output: {local_log})") if parts else cause()

    def step_where(cond):
        return next((s for s in _steps(read_log()) if cond(s)), None)

    script = (f"{HOROVOD_PYTHON} $(dirname $(command -v horovodrun))/elastic_train.py --until-file {until}"
              f" --commit-every {a.commit_every} --step-sleep {a.step_sleep_s}")
    cmd = (f"cd /tmp && horovodrun-elastic --min-np {n - 1} --max-np {n} -np {n}"
           f" --start-timeout {profile.smoke.start_timeout_s} {script} > {log} 2>&1")
    box: dict = {}
    # Each elastic job keeps its own evidence: a fault case's job in the same
    # run must not overwrite the property's log.
    local_log = log_path(cluster, f"elastic-{mode}-{stamp}.log")
    import threading

    job = threading.Thread(target=lambda: box.update(r=run_as(node1, user, cmd, timeout_s=a.job_timeout_s)),
                           daemon=True)
    failed, rejoin_error, down_s = False, "", None
    with timed(results, "availability"):
        listing(names)
        job.start()
        try:
            wait_until(f"elastic job trains at world size {n}", lambda: step_where(
                lambda s: s["size"] == n and s["step"] >= 2 * a.commit_every), a.step_timeout_s, on_timeout=cause)
            # The victim stays listed: the survivors must notice the failure.
            gloo_timeout = worker_setting(node1, user, until, "HOROVOD_GLOO_TIMEOUT_SECONDS")
            t_stop = node_clock(node1)
            events.append(("failed", t_stop))
            failed = True
            cluster.driver.fail_node(cluster, victim, mode)
            down_s = prove_down(cluster, hosts, victim, mode=mode)
            events.append(("failure proven", node_clock(node1)))
            shrunk = wait_until(f"elastic job goes on at world size {n - 1} after {victim} was {what}",
                                lambda: step_where(lambda s: s["size"] == n - 1 and s["t"] > t_stop),
                                a.step_timeout_s, on_timeout=survivors_wait)
            events.append((f"first step at world size {n - 1}", shrunk["t"]))
            events.append(("restored", node_clock(node1)))
            cluster.driver.restore_node(cluster, victim, mode)
            failed = False
            wait_until(f"{victim} healthy after it was restored", lambda: node_healthy(cluster, victim, mount),
                       a.restart_timeout_s)
            t_back = node_clock(node1)
            events.append(("healthy", t_back))
            # A node that never rejoins fails the rejoin property only: the
            # job is still ended and the recovery measured.
            try:
                grown = wait_until(f"elastic job back at world size {n} after {victim} was "
                                   + ("started again" if mode != "partition" else "reconnected"),
                                   lambda: step_where(lambda s: s["size"] == n and s["t"] > t_back),
                                   a.step_timeout_s, on_timeout=still_training)
                events.append((f"first step at world size {n}", grown["t"]))
            except pytest.fail.Exception as exc:
                grown, rejoin_error = None, str(exc)
            run_as(node1, user, f"touch {until}", timeout_s=30)
            job.join(a.job_timeout_s)
        finally:
            if failed:  # never leave a node down or cut off for the next checks
                cluster.driver.restore_node(cluster, victim, mode)
            if job.is_alive():
                # The launcher and its workers all carry this job's until-file
                # on their command line: asked to stop, then killed.  (A
                # launcher waiting on a lost host's SSH session outlived a
                # plain SIGTERM and held its rendezvous port for an hour.)
                run_as(node1, user, f"touch {until}; sleep 20; pkill -u {user} -f -- '{_job_pattern(until)}'; "
                       f"sleep 5; pkill -KILL -u {user} -f -- '{_job_pattern(until)}'", timeout_s=60)
                job.join(60)
            left = _kill_leftovers(hosts, names, user, until)
            listing(names)
            text = read_log()
            if local_log is not None:
                local_log.write_text(text, encoding="utf-8")
            run_as(node1, user, f"rm -f {until} {log}", timeout_s=30)
    if left:
        pytest.fail(f"the elastic job's processes outlived it (killed now): {'; '.join(left)} "
                    f"(full output: {local_log})")
    r = box.get("r")
    if r is None or r.rc != 0:
        pytest.fail(f"elastic job did not finish (exit {getattr(r, 'rc', '?')}): "
                    f"{checks.cause_line(text) or 'it printed nothing'} (full output: {local_log})")
    steps = _steps(text)
    sizes = [s["size"] for i, s in enumerate(steps) if i == 0 or s["size"] != steps[i - 1]["size"]]
    failure_seen = checks.failure_evidence(text)
    if not failure_seen:
        pytest.fail(f"the elastic job went on at world size {n - 1} after {victim} was {what}, but its output "
                    "shows no failure of a worker (no exit status, closed connection or blacklisted host): it "
                    f"did not notice the failure it is timed on (full output: {local_log})")
    run = {"world_sizes": sizes, "recovery_s": round(shrunk["t"] - t_stop, 2),
           "down_after_stop_s": round(down_s, 1), "failure_seen": failure_seen,
           "rejoin_s": round(grown["t"] - t_back, 2) if grown else None, "rejoin_error": rejoin_error,
           "steps_repeated": steps_repeated(steps), "step_resets": step_resets(steps),
           "gloo_timeout_s": float(gloo_timeout) if gloo_timeout else None,
           "steps": len(steps), "result": checks.parse_training_result(text), "victim": victim,
           "log": str(local_log), "mode": mode,
           "timeline": timeline(events, t_stop, text)}
    evidence = log_path(cluster, f"availability-{mode}-{stamp}.json")
    if evidence is not None:
        evidence.write_text(json.dumps(run, indent=2), encoding="utf-8")
        run["evidence"] = str(evidence)
    results.availability["elastic" if mode == "stop" else f"elastic_{mode}"] = run
    return run


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
