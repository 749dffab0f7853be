"""GPU stack checks, one test per node.  Expectations (GPUs per node, model,
minimum driver, CUDA and NCCL versions) come from the profile; on profiles
without GPUs every check is skipped with the profile's reason."""

import pytest

from refarch.judge import checks, gpu
from refarch.paths import load_versions
from refarch.pytest.hosts import run_as

pytestmark = [pytest.mark.integration, pytest.mark.check_phase]


@pytest.fixture
def expect(profile):
    want = profile.expect
    if want.gpus_per_node == 0:
        pytest.skip(f"profile {profile.name} expects 0 GPUs per node")
    return want


def test_gpus_healthy(node, node_name, expect):
    """nvidia-smi: GPU count and model, driver version, ECC on without
    uncorrected errors, persistence mode on."""
    r = node.run(gpu.NVIDIA_SMI_CMD)
    assert r.rc == 0, f"{node_name}: nvidia-smi failed (exit {r.rc}): {(r.stderr or r.stdout).strip()[-300:]}"
    problems = gpu.gpu_problems(gpu.parse_nvidia_smi_csv(r.stdout), expect.gpus_per_node, expect.gpu_model,
                                expect.min_driver_version)
    assert not problems, f"{node_name}: " + "; ".join(problems)


def test_cuda_version(node, node_name, expect):
    """The CUDA toolkit (nvcc) is at least the profile's version."""
    r = node.run("bash -lc 'nvcc --version'")
    have = gpu.parse_cuda_version(r.stdout)
    assert have, f"{node_name}: no CUDA toolkit (nvcc --version: {(r.stderr or r.stdout).strip()[-200:]})"
    if expect.min_cuda_version:
        assert gpu.at_least(have, expect.min_cuda_version), (
            f"{node_name}: CUDA {have} is older than {expect.min_cuda_version}")


def test_nccl_version(node, node_name, expect):
    """NCCL (libnccl2) is installed, at least the profile's version."""
    r = node.run("dpkg-query -W -f '${Version}' libnccl2")
    have = gpu.parse_nccl_version(r.stdout) if r.rc == 0 else None
    assert have, f"{node_name}: libnccl2 is not installed"
    if expect.min_nccl_version:
        assert gpu.at_least(have, expect.min_nccl_version), (
            f"{node_name}: NCCL {have} is older than {expect.min_nccl_version}")


def test_horovod_built_with_nccl(node, node_name, expect, profile):
    """`horovodrun --check-build` lists NCCL among the tensor operations."""
    r = run_as(node, profile.training_user.name, "horovodrun --check-build", timeout_s=120)
    built = checks.parse_check_build(r.stdout)
    assert "NCCL" in built["tensor_operations"], (
        f"{node_name}: Horovod has no NCCL operations (built: {built['tensor_operations']})")


def test_dcgm_diagnostic(node, node_name, expect):
    """A short DCGM diagnostic (`dcgmi diag -r 1`) passes.  The gpu role
    installs DCGM when the pins say so (descriptors/versions.yml
    gpu.install_dcgm): then a missing dcgmi is a failed install and fails
    here; only pins that leave DCGM out skip."""
    missing = node.run("command -v dcgmi").rc != 0
    reason = gpu.dcgm_missing_verdict(load_versions().get("gpu", {}), node_name) if missing else None
    if reason is not None:
        verdict, message = reason
        if verdict == "skip":
            pytest.skip(message)
        pytest.fail(message)
    r = node.run("timeout 300 dcgmi diag -r 1")
    assert r.rc != 124, f"{node_name}: dcgmi diag -r 1 ran past 300 s"
    failed = gpu.dcgm_failures(r.stdout)
    assert r.rc == 0 and not failed, f"{node_name}: dcgmi diag -r 1 failed: {failed or r.stdout.strip()[-300:]}"
