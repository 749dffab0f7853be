"""Checks run again against a kept cluster in a child pytest, as
``refarch test RUN_ID -k ...`` would run them: used by the fault cases
(after breaking a node) and by the restart property (after a node came
back), both reading the outcomes from the child's JUnit file."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path

from .paths import ROOT


def run_checks(run_id: str, selection: str, junit: Path, tests: Sequence[str] = ("tests/integration",),
               extra_args: Sequence[str] = (), timeout_s: int = 900,
               env: Mapping[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """Run ``tests`` (paths under the checkout) selected by ``selection``
    (pytest -k; empty: all) against the kept cluster ``run_id``, in ``env``
    (default: this process's); returns {test name: (outcome, message)}:
    outcome passed, failed (also errors) or skipped; message is the
    failure's message and text."""
    cmd = [sys.executable, "-m", "pytest", *(str(ROOT / t) for t in tests), "--run-id", run_id,
           *(["-k", selection] if selection else []), "-p", "no:cacheprovider", "-q", f"--junitxml={junit}",
           *extra_args]
    subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, check=False,
                   env=dict(env) if env is not None else None)
    outcomes = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        if failure is not None:
            outcomes[case.get("name")] = ("failed", failure.get("message", "") + "\n" + (failure.text or ""))
        elif case.find("skipped") is not None:
            outcomes[case.get("name")] = ("skipped", "")
        else:
            outcomes[case.get("name")] = ("passed", "")
    return outcomes
