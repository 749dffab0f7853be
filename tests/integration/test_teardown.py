"""Teardown always runs: a suite stopped by SIGTERM during the Ansible phase,
and a deploy that fails half-way, leave nothing of their run behind.

Each test starts the suite itself as a child process (one node, only the
sshd check selected) and then looks for the child's run id on the host.
"""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from refarch import localcloud
from refarch.paths import ROOT, runs_dir

pytestmark = pytest.mark.integration


def _start_suite(profile_name: str, env_extra: dict | None = None) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "pytest", str(ROOT / "tests/integration/test_nodes.py"), "-k", "sshd",
           "--profile", profile_name, "--set", "nodes.count=1", "-p", "no:cacheprovider"]
    child = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env={**os.environ, **(env_extra or {})})
    for line in child.stdout:
        m = re.match(r"refarch: run (\S+),", line)
        if m:
            return child, m.group(1)
    child.wait()
    pytest.fail(f"the suite printed no run id (exit {child.returncode})")


def _wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(1)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")


def _assert_nothing_left(run_id: str):
    assert localcloud.leaks(run_id) == {}, f"run {run_id} left podman resources: {localcloud.leaks(run_id)}"
    state = runs_dir() / run_id / "terraform" / "terraform.tfstate"
    if state.exists():
        import json

        resources = json.loads(state.read_text()).get("resources", [])
        assert resources == [], f"run {run_id} left Terraform state: {[r['type'] for r in resources]}"


def test_sigterm_during_configure_tears_down(run_state):
    child, run_id = _start_suite(run_state.profile_name)
    log = runs_dir() / run_id / "logs" / "ansible.log"
    try:
        _wait_for(lambda: log.exists() and "TASK [" in log.read_text(errors="replace"), 900, "the Ansible phase")
        assert localcloud.run_resources(run_id)["containers"], "the child deployed no node"
        child.send_signal(signal.SIGTERM)
        out, _ = child.communicate(timeout=300)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode != 0
    assert "received SIGTERM" in out
    _assert_nothing_left(run_id)


def test_failed_deploy_tears_down(run_state):
    # Nodes that do not boot in time make the create provisioner fail: the
    # resource is tainted and its destroy provisioner never runs, so only the
    # sweep by run-id label removes the container.
    child, run_id = _start_suite(run_state.profile_name, {"REFARCH_BOOT_TIMEOUT": "0"})
    out, _ = child.communicate(timeout=900)
    assert child.returncode != 0
    assert "sshd not active" in out or "terraform apply failed" in out, out[-2000:]
    _assert_nothing_left(run_id)
    teardown = Path(runs_dir() / run_id / "run.json").read_text()
    assert '"containers"' in teardown, "the sweep found no container: the fault was not injected"
