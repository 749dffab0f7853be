from pathlib import Path

from refarch.judge import gpu

DATA = Path(__file__).parent / "data" / "gpu"


def test_healthy_v100_pair_passes():
    gpus = gpu.parse_nvidia_smi_csv((DATA / "nvidia-smi-query-2xv100.csv").read_text())
    assert [g["name"] for g in gpus] == ["Tesla V100-SXM2-32GB"] * 2
    assert gpu.gpu_problems(gpus, 2, "Tesla V100", "550.54") == []


def test_every_gpu_fault_is_named():
    gpus = gpu.parse_nvidia_smi_csv((DATA / "nvidia-smi-query-faulty.csv").read_text())
    problems = gpu.gpu_problems(gpus, 2, "A100", "550.54")
    assert problems == [
        "1 GPUs, expected 2",
        "GPU 0 (Tesla V100-SXM2-32GB) is not a A100",
        "GPU 0 (Tesla V100-SXM2-32GB) driver 535.104.05 is older than 550.54",
        "GPU 0 (Tesla V100-SXM2-32GB) ECC is Disabled",
        "GPU 0 (Tesla V100-SXM2-32GB) has 3 uncorrected ECC errors",
        "GPU 0 (Tesla V100-SXM2-32GB) persistence mode is Disabled",
    ]


def test_no_gpu_at_all():
    assert gpu.gpu_problems(gpu.parse_nvidia_smi_csv(""), 1, None, None) == ["0 GPUs, expected 1"]


def test_cuda_and_nccl_versions():
    assert gpu.parse_cuda_version((DATA / "nvidia-smi-banner.txt").read_text()) == "12.4"
    assert gpu.parse_cuda_version((DATA / "nvcc-version.txt").read_text()) == "12.4"
    assert gpu.parse_cuda_version("command not found") is None
    assert gpu.parse_nccl_version("2.21.5-1+cuda12.4") == "2.21.5"
    assert gpu.parse_nccl_version("node1:1234:1234 [0] NCCL INFO NCCL version 2.18.3+cuda12.2") == "2.18.3"


def test_version_comparison():
    assert gpu.at_least("550.54.15", "550.54")
    assert gpu.at_least("12.4", "12.4") and not gpu.at_least("12.2", "12.4")
    assert not gpu.at_least("2.18.3", "2.21")


def test_dcgm_failures():
    assert gpu.dcgm_failures((DATA / "dcgmi-diag-r1-fail.txt").read_text()) == ["Persistence Mode"]
    assert gpu.dcgm_failures("| Denylist | Pass |\n") == []


def test_a_missing_dcgmi_fails_where_the_gpu_role_installs_it():
    verdict, message = gpu.dcgm_missing_verdict({"install_dcgm": True, "dcgm_package": "datacenter-gpu-manager"},
                                                "node2")
    assert verdict == "fail"
    assert message.startswith("node2: dcgmi is not installed, but the gpu role installs datacenter-gpu-manager")
    assert gpu.dcgm_missing_verdict({"install_dcgm": False}, "node2")[0] == "skip"
    # The pins the architecture ships install it.
    from refarch.paths import load_versions
    assert gpu.dcgm_missing_verdict(load_versions()["gpu"], "node1")[0] == "fail"
