"""Concurrent runs on one machine (a GitLab runner with ``concurrent > 1``, or
an engineer with two clones): two main jobs started at the same time get
different run ids, subnets and names and both pass; while they run, a second
checkout's bad input costs nothing and its stale sweep leaves both alone.

Each main job keeps its run directory in a folder of its own, as two
checkouts would; ownership is decided from the machine (podman labels), so
no checkout's files can make another's live cluster look orphaned.
"""

import json
import os
import stat
import subprocess
import sys

import pytest

from refarch.clouds import local as localcloud
from refarch.paths import ROOT

from .suite import assert_nothing_left, checkout_copy, start_suite, wait_for

pytestmark = pytest.mark.integration

#: Two 2-node clusters at once must fit in 24 GiB with the host's own needs.
SMALL_NODES = ["--set", "nodes.flavor.memory_mb=3072"]
#: Each job deploys, configures, checks every node and the cluster, and
#: tears down: everything that names, addresses or owns resources.  The
#: smoke job and the properties are left to the main job's own environment
#: (tox -e integration): two of them at once on 2 shared cores measure only
#: the contention (efficiency fell to 32 % against 49 % alone), and they
#: took about a third of this test's time.  So is the playbook's second run
#: (idempotence): it names and creates nothing the first run did not.
CHECKS_ONLY = ["-k", "not test_training and not test_scaling_table and not test_property"
               " and not test_playbook_idempotent"]


def _in_checkout(checkout, *args, timeout_s=300):
    """Run ``python -m <args>`` with ``checkout``'s own code and run directories."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "REFARCH_RUNS_DIR": str(checkout / "runs")}
    return subprocess.run([sys.executable, "-m", *args], cwd=checkout, capture_output=True, text=True,
                          timeout=timeout_s, check=False, env=env)


def test_two_main_jobs_at_once_and_a_second_checkouts_bad_input(run_state, tmp_path):
    jobs = [start_suite([str(ROOT / "tests/integration"), "--profile", run_state.profile_name, *SMALL_NODES,
                         *CHECKS_ONLY],
                        runs_dir=tmp_path / f"checkout{i}-runs") for i in (1, 2)]
    try:
        # Both are deploying or configuring: both have live nodes.
        for job in jobs:
            wait_for(lambda job=job: (job.rundir / "logs" / "ansible.log").exists(), 900,
                     f"{job.run_id} to reach the Ansible phase", job)
        containers = [set(localcloud.run_resources(job.run_id)["containers"]) for job in jobs]
        assert containers[0] and containers[1] and not containers[0] & containers[1], containers
        copy = checkout_copy(tmp_path / "second-checkout")
        bad = _in_checkout(copy, "pytest", "tests/integration", "--profile", "nosuch", "-p", "no:cacheprovider")
        assert bad.returncode == 4, bad.stdout + bad.stderr
        assert "unknown profile 'nosuch'" in bad.stderr, bad.stderr
        sweep = _in_checkout(copy, "refarch", "sweep", "--stale")
        assert sweep.returncode == 0, sweep.stderr
        for job in jobs:
            assert f"leaving {job.run_id}: owner process" in sweep.stdout, sweep.stdout
            assert f"removing {job.run_id}" not in sweep.stdout
        outs = [job.finish(1800) for job in jobs]
    finally:
        for job in jobs:
            if job.process.poll() is None:
                job.process.terminate()
                job.finish(600)
    for job, out in zip(jobs, outs, strict=True):
        assert job.process.returncode == 0, f"{job.run_id} failed:\n{out[-4000:]}"
        assert_nothing_left(job)
    a, b = (json.loads((job.rundir / "run.json").read_text()) for job in jobs)
    assert jobs[0].run_id != jobs[1].run_id
    assert a["subnet"] != b["subnet"], (a["subnet"], b["subnet"])
    assert all(job.results["check_counts"].get("passed", 0) > 30 for job in jobs)
    for job in jobs:  # what holds keys and state is the owner's alone
        modes = {str(p.relative_to(job.rundir)): oct(stat.S_IMODE(p.stat().st_mode))
                 for p in (job.rundir, job.rundir / "ssh" / "id_ed25519", job.rundir / "ssh" / "cluster" / "id_ed25519",
                           job.rundir / "terraform" / "terraform.tfvars.json",
                           job.rundir / "terraform" / "terraform.tfstate")}
        assert modes == {".": "0o700", "ssh/id_ed25519": "0o600", "ssh/cluster/id_ed25519": "0o600",
                         "terraform/terraform.tfvars.json": "0o600", "terraform/terraform.tfstate": "0o600"}, modes
