"""The suite's node checks (tests/integration/test_nodes.py) run against the
VMs of a VM scenario, in existing-hosts mode with the OpenStack profile's
expectations, as a child pytest: what the VM tests use to show that a check
passes against real kernels and fails, naming the node, on a fault."""

import subprocess
import sys

from refarch.paths import ROOT


def node_checks(vm_run, junit, select: str) -> tuple[bool, str, list[str]]:
    """tests/integration/test_nodes.py's checks that ``select`` (pytest -k)
    picks, against the VMs of ``vm_run``: (all passed and none skipped,
    pytest's output, its FAILED/ERROR lines with their messages)."""
    r = subprocess.run([sys.executable, "-m", "pytest", "tests/integration/test_nodes.py", "--existing-hosts",
                        str(vm_run.path / "inventory.yml"), "--profile", "openstack-v100", "-k", select,
                        "-p", "no:cacheprovider", "-q", "-rfEs", f"--junitxml={junit}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=900)
    failed = [line for line in r.stdout.splitlines() if line.startswith(("FAILED", "ERROR", "E   "))]
    passed = r.returncode == 0 and " passed" in r.stdout and "skipped" not in r.stdout.splitlines()[-1]
    return passed, r.stdout, failed
