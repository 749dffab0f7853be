"""Teardown always runs, and an interrupted run says so: SIGTERM and SIGINT
during terraform apply, during Ansible and during the smoke job; a deploy
that fails half-way; SIGKILL during the smoke job followed by the next
run's stale sweep.  After each, nothing of the run is left (containers,
networks, volumes, bridge, nftables rules, Terraform state, subnet
reservation), and destroying a destroyed run again is a no-op.

Each test starts the suite itself as a child process on a one-node cluster
(``tox -e teardown``); the child's run is what is interrupted.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from refarch.clouds import local as localcloud
from refarch.paths import ROOT

from .suite import assert_nothing_left, configuring, deploying, start_suite, training, wait_for

pytestmark = pytest.mark.integration

ONE_NODE = ["--set", "nodes.count=1"]


def _suite(profile_name: str, selection: str, **kwargs):
    test_file = "test_smoke.py" if selection == "single_rank" else "test_nodes.py"
    return start_suite([str(ROOT / "tests/integration" / test_file), "-k", selection,
                        "--profile", profile_name, *ONE_NODE], **kwargs)


def _assert_reported(child, out: str, sig: str, phase: str) -> None:
    """The interruption shows in the job log, the results JSON and JUnit."""
    assert child.process.returncode != 0
    assert f"received {sig} during {phase}" in out, out[-3000:]
    assert f"tearing down run {child.run_id} ({sig} during {phase})" in out, out[-3000:]
    assert f"teardown of run {child.run_id} done: nothing left" in out, out[-3000:]
    assert f"INTERRUPTED by {sig} during the {phase} phase" in out, out[-3000:]
    results = child.results
    assert results["interrupted"] == {"signal": sig, "phase": phase}
    assert results["teardown"]["leaks"] == {} and results["teardown"]["state"] == []
    errors = child.junit_errors()
    assert any(sig in message and phase in message for message in errors.values()), errors


def _interrupt(child, ready, what: str, sig: signal.Signals, phase: str, timeout_s: float, every_s: float) -> str:
    """Wait until ``ready(child)``, send ``sig`` to the child, and check the
    run reported the interruption and left nothing; returns its output."""
    wait_for(lambda: ready(child), timeout_s, what, child, every_s=every_s)
    child.process.send_signal(sig)
    out = child.finish(600)
    _assert_reported(child, out, sig.name, phase)
    assert_nothing_left(child)
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_interrupt_during_terraform_apply(run_state, sig):
    child = _suite(run_state.profile_name, "sshd")
    _interrupt(child, deploying, "terraform apply to make the network", sig, "deploy", 600, 0.2)


def test_sigterm_during_configure(run_state):
    child = _suite(run_state.profile_name, "sshd")
    _interrupt(child, configuring, "the Ansible phase", signal.SIGTERM, "configure", 900, 0.5)


def test_sigterm_to_the_whole_main_job_reaches_the_log(run_state):
    """A CI runner cancelling a job sends SIGTERM to every process of it
    (ci/main-job.sh, tox, pytest): tox must wait for the teardown and relay
    its lines instead of dying at once."""
    job = start_suite([], command=[str(ROOT / "ci" / "main-job.sh"), str(ROOT / "tests/integration/test_nodes.py"),
                                   "-k", "sshd", "--set", "nodes.count=1"], new_session=True)
    wait_for(lambda: configuring(job), 900, "the Ansible phase", job)
    os.killpg(job.process.pid, signal.SIGTERM)
    out = job.finish(600)
    assert job.process.returncode != 0
    assert f"teardown of run {job.run_id} done: nothing left" in out, out[-3000:]
    assert "INTERRUPTED by SIG" in out and "during the configure phase" in out, out[-3000:]
    assert job.results["interrupted"]["phase"] == "configure"
    assert_nothing_left(job)


def _checking_a_fault(child) -> bool:
    """True while a fault case's checks run against the child's cluster (a
    child pytest attached with ``--run-id``)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--run-id" in args and child.run_id.encode() in args:
            return True
    return False


def _destroyed(child) -> bool:
    meta = child.rundir / "run.json"
    return meta.exists() and bool(json.loads(meta.read_text(encoding="utf-8")).get("destroyed"))


def test_plain_tox_faults_cancelled_with_sigterm_tears_down(run_state):
    """As a GitLab job script runs it: plain tox (not ci/tox), cancelled with
    SIGTERM to the whole job while a fault case's checks run.  Plain tox dies
    at once and with it the reader of pytest's output; the suite must tear
    its cluster down all the same (the lines it can no longer print are lost).
    One node and F3 (the share's export made root-owned on node1): a fault
    case's checks as any other, one node's configure less to wait for."""
    job = start_suite([], command=[str(ROOT / ".venv" / "bin" / "tox"), "-e", "faults", "--", "-k", "F3", *ONE_NODE],
                      new_session=True)
    wait_for(lambda: _checking_a_fault(job), 1200, "a fault case's checks", job, every_s=0.3)
    os.killpg(job.process.pid, signal.SIGTERM)
    job.finish(120)
    wait_for(lambda: _destroyed(job), 600, f"run {job.run_id} torn down after tox died")
    assert_nothing_left(job)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_interrupt_during_the_smoke_job(run_state, sig):
    child = _suite(run_state.profile_name, "single_rank")
    _interrupt(child, training, "the smoke job's benchmark on node1", sig, "smoke", 1500, 2)
    # A second destroy of the destroyed run is a no-op.
    again = subprocess.run([sys.executable, "-m", "refarch", "destroy", child.run_id], cwd=ROOT,
                           capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 0, again.stderr
    assert_nothing_left(child)


def test_sigkill_during_smoke_then_the_next_runs_stale_sweep(run_state):
    killed = _suite(run_state.profile_name, "single_rank")
    wait_for(lambda: training(killed), 1500, "the smoke job's benchmark on node1", killed, every_s=2)
    killed.process.kill()
    killed.finish(60)
    assert killed.process.returncode == -signal.SIGKILL
    # Nothing tore it down.
    assert "containers" in localcloud.leftovers(killed.run_id, killed.rundir)
    # The next run sweeps it before it creates anything (its own deploy fails
    # on purpose: nodes that do not boot in time).
    nxt = _suite(run_state.profile_name, "sshd", env={"REFARCH_BOOT_TIMEOUT": "0"})
    out = nxt.finish(900)
    assert f"removing {killed.run_id}: owner process" in out, out[-3000:]
    assert_nothing_left(killed)
    # The next run's failed deploy was torn down too, by terraform destroy
    # itself: its node is tainted (Terraform runs no destroy provisioner for
    # it), and the network's destroy removes the run's own containers still
    # attached.  No stale terraform pid file stays in the run directory.
    assert nxt.process.returncode != 0
    assert "sshd not active" in out or "terraform apply failed" in out, out[-2000:]
    teardown = json.loads((nxt.rundir / "run.json").read_text()).get("teardown") or {}
    assert not teardown.get("destroy_error"), teardown["destroy_error"]
    assert f"teardown of run {nxt.run_id} done: nothing left" in out, out[-3000:]
    assert_nothing_left(nxt)
    assert not (nxt.rundir / "bin" / "terraform.pid").exists()
