"""Fixtures of the VM scenarios' verify tests: the run (REFARCH_VM_RUN_ID,
set by the scenario's verify playbook) and testinfra hosts over SSH with
the run's config (strict host key checking)."""

import os

import pytest
import testinfra

from refarch.run import RunDir

RUN_ID = os.environ.get("REFARCH_VM_RUN_ID", "")


@pytest.fixture(scope="module")
def vm_run() -> RunDir:
    if not RUN_ID:
        pytest.skip("run by a VM scenario's verify (tox -e molecule -- -s nfs): REFARCH_VM_RUN_ID is unset")
    return RunDir.open(RUN_ID)


@pytest.fixture(scope="module")
def vm_hosts(vm_run) -> dict:
    config = vm_run.ssh_dir / "config"
    return {n["name"]: testinfra.get_host(f"ssh://{n['name']}", ssh_config=str(config))
            for n in vm_run.read_meta()["nodes"]}
