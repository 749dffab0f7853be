"""Helpers for the lifecycle proofs: start the suite as a child process (as
a CI job would run it), wait for a phase, and list what a run left behind."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from refarch import proc
from refarch.clouds import local as localcloud
from refarch.paths import ROOT


@dataclass
class Child:
    """A suite started as a child process, with its run id and run directory."""

    process: subprocess.Popen
    run_id: str
    rundir: Path
    head: str

    def finish(self, timeout_s: float = 900) -> str:
        """Wait for the child; its whole output (stdout and stderr)."""
        try:
            out, _ = self.process.communicate(timeout=timeout_s)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        return self.head + out

    @property
    def results(self) -> dict:
        return json.loads((self.rundir / "results.json").read_text(encoding="utf-8"))

    def junit_errors(self) -> dict[str, str]:
        """JUnit test name -> message of every error and failure."""
        out = {}
        for case in ET.parse(self.rundir / "junit.xml").getroot().iter("testcase"):
            bad = case.find("error")
            if bad is None:
                bad = case.find("failure")
            if bad is not None:
                out[f"{case.get('classname')}.{case.get('name')}"] = bad.get("message", "")
        return out


def start_suite(args: list[str], *, env: dict | None = None, runs_dir: Path | None = None,
                cwd: Path = ROOT, command: list[str] | None = None, new_session: bool = False) -> Child:
    """Start ``pytest <args>`` (or ``command``) as a child (its own run) and
    return once it printed its run id.  With ``new_session`` the child leads
    a process group of its own, as a CI job does.

    Raises:
        pytest.fail: the child printed no run id.
    """
    child_env = {**os.environ, **(env or {})}
    if runs_dir is not None:
        child_env["REFARCH_RUNS_DIR"] = str(runs_dir)
    cmd = command or [sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider"]
    process = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=child_env, start_new_session=new_session)
    head = []
    for line in process.stdout:
        head.append(line)
        m = re.match(r"refarch: run (\S+),", line)
        if m:
            base = runs_dir or Path(child_env.get("REFARCH_RUNS_DIR") or ROOT / "runs")
            return Child(process, m.group(1), base / m.group(1), "".join(head))
    process.wait()
    pytest.fail(f"the suite printed no run id (exit {process.returncode}): {''.join(head)[-1500:]}")


def checkout_copy(dest: Path) -> Path:
    """A copy of this checkout's tree at ``dest`` (no runs, virtualenvs,
    installed npm packages or git data), as a second clone on the same machine."""
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns("runs", ".tox", ".venv", ".git", "__pycache__",
                                                             "*.egg-info", "node_modules", ".gitlab-ci-local"))
    return dest


def wait_for(predicate, timeout_s: float, what: str, child: Child | None = None, every_s: float = 0.5) -> None:
    """Poll ``predicate`` until it is true.

    Raises:
        pytest.fail: ``timeout_s`` passed, or ``child`` exited first.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        if child is not None and child.process.poll() is not None:
            pytest.fail(f"the child exited ({child.process.returncode}) before {what}: {child.finish()[-2000:]}")
        time.sleep(every_s)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")


def deploying(child: Child) -> bool:
    """True once terraform apply has made the run's network (its nodes follow)."""
    meta = child.rundir / "run.json"
    return meta.exists() and "subnet" in meta.read_text() and bool(localcloud.run_resources(child.run_id)["networks"])


def configuring(child: Child) -> bool:
    """True once Ansible runs its first task."""
    log = child.rundir / "logs" / "ansible.log"
    return log.exists() and "TASK [" in log.read_text(errors="replace")


def training(child: Child, node: str = "node1") -> bool:
    """True while the smoke job's benchmark runs on ``node``."""
    # podman top reads the container's processes from the host (no ps needed inside).
    r = proc.run(["podman", "top", f"{child.run_id}-{node}", "args"], timeout_s=30, check=False)
    return "tf2_synthetic_benchmark" in r.stdout


def assert_nothing_left(child: Child) -> None:
    """No container, network, volume, bridge, nftables rule, Terraform state
    or subnet reservation of the child's run remains."""
    left = localcloud.leftovers(child.run_id, child.rundir)
    assert left == {}, f"run {child.run_id} left: {left}"
