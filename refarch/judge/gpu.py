"""Parsing and judging the GPU stack of a node: nvidia-smi, CUDA, NCCL, DCGM.

The node checks (tests/integration/test_gpu.py) collect the outputs over
SSH; these pure functions are unit-tested on recorded outputs.
"""

from __future__ import annotations

import re

#: The nvidia-smi query the GPU checks run (fields in this order).
NVIDIA_SMI_QUERY = ("index,name,driver_version,ecc.mode.current,"
                    "ecc.errors.uncorrected.volatile.total,persistence_mode")
NVIDIA_SMI_CMD = f"nvidia-smi --query-gpu={NVIDIA_SMI_QUERY} --format=csv,noheader,nounits"
_FIELDS = ("index", "name", "driver_version", "ecc_mode", "ecc_uncorrected", "persistence_mode")


def version_tuple(text: str) -> tuple[int, ...]:
    """``"550.54.15"`` -> ``(550, 54, 15)``; non-numeric tails are ignored.

    Raises:
        ValueError: no leading number.
    """
    parts = re.findall(r"\d+", text.split("-")[0].split("+")[0])
    if not parts:
        raise ValueError(f"not a version: {text!r}")
    return tuple(int(p) for p in parts)


def at_least(have: str, want: str) -> bool:
    """True when version ``have`` >= ``want`` (numeric, component-wise)."""
    h, w = version_tuple(have), version_tuple(want)
    width = max(len(h), len(w))
    return h + (0,) * (width - len(h)) >= w + (0,) * (width - len(w))


def parse_nvidia_smi_csv(text: str) -> list[dict[str, str]]:
    """Rows of ``nvidia-smi --query-gpu=<NVIDIA_SMI_QUERY> --format=csv,noheader,nounits``."""
    rows = []
    for line in text.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == len(_FIELDS):
            rows.append(dict(zip(_FIELDS, cells, strict=True)))
    return rows


def gpu_problems(gpus: list[dict[str, str]], count: int, model: str | None, min_driver: str | None) -> list[str]:
    """What is wrong with a node's GPUs against the profile: count, model,
    driver version, ECC off or uncorrected errors, persistence off."""
    problems = []
    if len(gpus) != count:
        problems.append(f"{len(gpus)} GPUs, expected {count}")
    for gpu in gpus:
        tag = f"GPU {gpu['index']} ({gpu['name']})"
        if model and model.lower() not in gpu["name"].lower():
            problems.append(f"{tag} is not a {model}")
        if min_driver and not at_least(gpu["driver_version"], min_driver):
            problems.append(f"{tag} driver {gpu['driver_version']} is older than {min_driver}")
        if gpu["ecc_mode"] not in ("Enabled", "[N/A]", "N/A"):
            problems.append(f"{tag} ECC is {gpu['ecc_mode']}")
        if gpu["ecc_uncorrected"] not in ("0", "[N/A]", "N/A"):
            problems.append(f"{tag} has {gpu['ecc_uncorrected']} uncorrected ECC errors")
        if gpu["persistence_mode"] != "Enabled":
            problems.append(f"{tag} persistence mode is {gpu['persistence_mode']}")
    return problems


def parse_cuda_version(text: str) -> str | None:
    """The CUDA version from ``nvidia-smi`` (``CUDA Version: 12.4``) or
    ``nvcc --version`` (``release 12.4, V12.4.131``); None when absent."""
    m = re.search(r"CUDA Version:\s*([\d.]+)", text) or re.search(r"release\s+([\d.]+),", text)
    return m.group(1) if m else None


def parse_nccl_version(text: str) -> str | None:
    """NCCL's version from ``dpkg-query -W -f '${Version}' libnccl2``
    (``2.21.5-1+cuda12.4``) or an ``NCCL version 2.21.5`` log line."""
    m = re.search(r"(?:NCCL version\s+)?(\d+\.\d+\.\d+)", text)
    return m.group(1) if m else None


def dcgm_failures(text: str) -> list[str]:
    """Test names that ``dcgmi diag -r 1`` reports as Fail."""
    failures = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[-1].lower().startswith("fail"):
            failures.append(cells[0])
    return failures


def dcgm_missing_verdict(gpu_pins: dict, node_name: str) -> tuple[str, str]:
    """What a node without ``dcgmi`` means, from the pins' ``gpu`` section
    (descriptors/versions.yml): ("fail", why) when the gpu role installs
    DCGM there (``install_dcgm`` true: the install failed or was undone),
    ("skip", why) when the pins leave DCGM out."""
    if gpu_pins.get("install_dcgm"):
        package = gpu_pins.get("dcgm_package", "DCGM")
        return ("fail", f"{node_name}: dcgmi is not installed, but the gpu role installs {package} "
                        "(versions.yml gpu.install_dcgm: true): the install failed or was undone")
    return ("skip", f"{node_name}: DCGM is not installed (versions.yml gpu.install_dcgm is false)")
