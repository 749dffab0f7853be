"""The headroom check's judgement (refarch.headroom) on a probe recorded on
node2 of a local cluster (tests/unit/data/headroom), and on the same
readings as the fault cases F23-F25 leave them."""

from pathlib import Path

import pytest

from refarch import headroom
from refarch.headroom import Headroom

DATA = Path(__file__).parent / "data" / "headroom"
HEALTHY = headroom.parse_probe((DATA / "node2-probe.txt").read_text())
NEED = Headroom(rank_memory_mib={"smoke": 660}, reserve_memory_mib=256, min_free_mib=256, min_free_inodes=10000)
PATHS = {"/tmp": "/tmp", "shared mount": "/shared", "home": "/home/hvd"}


def test_the_recorded_node_has_headroom():
    assert headroom.memory_problem(HEALTHY, 916, "x") == ""
    assert headroom.cpu_problem(HEALTHY, 1, "x") == ""
    assert headroom.disk_problems(HEALTHY, PATHS, NEED) == []
    assert headroom.limit_problems({"nofile": "1024", "nproc": "4096", "memlock": "8192"}, NEED, "hvd") == []


def test_a_cgroup_memory_limit_below_the_need_is_named():
    readings = {**HEALTHY, "cg_limit": str(700 << 20)}
    assert headroom.memory_problem(readings, 916, "1 rank x 660 MiB resident (smoke) + 256 MiB reserve") == (
        "memory: 653 MiB available (cgroup limit 700 MiB, 47 MiB in use; MemAvailable 23513 MiB), need 916 MiB "
        "(1 rank x 660 MiB resident (smoke) + 256 MiB reserve)")
    # cgroup v2 and no limit: the machine's MemAvailable decides.
    assert headroom.memory_problem({**HEALTHY, "cg_limit": "max"}, 916, "x") == ""
    assert headroom.memory_problem({"mem_available_kib": "512000", "cg_limit": "max"}, 916, "x").startswith(
        "memory: 500 MiB available (MemAvailable 500 MiB)")


def test_a_cpu_quota_below_a_rank_is_named():
    assert headroom.cpu_problem({**HEALTHY, "cpu_max": "50000 100000"}, 1, "1 rank x 1 intra-op thread") == (
        "CPU: 0.5 CPUs (cgroup quota 50000/100000 us; nproc 2), need 1 (1 rank x 1 intra-op thread)")
    assert headroom.cpu_problem({**HEALTHY, "cpu_max": "max 100000"}, 2, "x") == ""


def test_a_full_tmp_is_named_by_space_and_inodes():
    readings = {**HEALTHY, "free:/tmp": "0 0 256"}
    assert headroom.disk_problems(readings, PATHS, NEED) == [
        "/tmp (/tmp): 0 MiB free, need 256 MiB", "/tmp (/tmp): 0 inodes free, need 10000"]
    # sshfs reports no inodes: judged on space only.
    assert headroom.disk_problems({**HEALTHY, "free:/shared": "73273128 0 0"}, PATHS, NEED) == []
    assert headroom.disk_problems({**HEALTHY, "free:/tmp": ""}, PATHS, NEED) == [
        "/tmp (/tmp): free space not read ('')"]


def test_a_low_open_file_limit_over_ssh_is_named():
    limits = headroom.parse_limits("20\n4096\nunlimited\n")
    assert headroom.limit_problems(limits, NEED.model_copy(update={"min_memlock_kib": 65536}), "hvd") == [
        "nofile limit of hvd over SSH: 20, need 1024"]
    with pytest.raises(ValueError, match="expected three limits"):
        headroom.parse_limits("ssh: connect to host node2 port 22: Connection refused\n")


def test_file_cache_counts_as_free_under_a_cgroup_limit():
    """The first node of 8 (sshfs server, 2 GiB) after the jobs: 864 MiB
    in use, 715 MiB of it the share's page cache (recorded 2026-12-06)."""
    readings = {"mem_available_kib": "23734676", "cg_limit": "2147483648", "cg_usage": "905580544",
                "cg_file_cache": "749191168"}
    assert headroom.memory_problem(readings, 1380, "1 rank") == ""
    assert headroom.memory_problem({**readings, "cg_file_cache": "0"}, 1380, "1 rank").startswith(
        "memory: 1184 MiB available (cgroup limit 2048 MiB, 864 MiB in use")


def test_the_probe_prints_whole_numbers_on_this_machine():
    """Run here as it runs on a node: awk's print writes large numbers as
    2.35076e+09, which int() refuses (seen on a node with 2.2 GB cached)."""
    import subprocess

    out = subprocess.run(["sh", "-c", headroom.PROBE, "probe", "/tmp"], capture_output=True, text=True,
                         check=True).stdout
    readings = headroom.parse_probe(out)
    for key in ("mem_available_kib", "cg_usage", "cg_file_cache", "nproc"):
        assert readings.get(key, "0").lstrip("-").isdigit(), (key, readings.get(key))
