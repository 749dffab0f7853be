"""The leak check finds a run's resources by name as well as by label
(FAULTS.md F17): a volume named with the run's id prefix whose label was
lost is reported, and the sweep removes it."""

import pytest

from refarch import localcloud, proc
from refarch.run import new_run_id

pytestmark = pytest.mark.integration


def test_an_unlabelled_volume_of_the_run_is_a_leak_and_is_swept():
    run_id = new_run_id("leak")
    name = f"{run_id}-data"
    proc.run(["podman", "volume", "create", name], timeout=60)
    try:
        assert localcloud.leaks(run_id) == {"volumes": [name]}
        swept = localcloud.sweep(run_id)
        assert swept["volumes"] == [name]
        assert localcloud.leaks(run_id) == {}
    finally:
        proc.run(["podman", "volume", "rm", "-f", name], timeout=60, check=False)


def test_another_runs_resources_are_not_matched_by_a_shorter_prefix():
    run_id = new_run_id("leak")
    other = f"{run_id}x-data"  # a run id that merely starts like ours
    proc.run(["podman", "volume", "create", other], timeout=60)
    try:
        assert localcloud.leaks(run_id) == {}
    finally:
        proc.run(["podman", "volume", "rm", "-f", other], timeout=60, check=False)


def test_a_run_whose_id_extends_ours_is_not_ours():
    run_id = new_run_id("leak")
    other = f"{run_id}-x-net"  # the network of run "<run_id>-x"
    proc.run(["podman", "volume", "create", other], timeout=60)
    try:
        assert localcloud.leaks(run_id) == {}
    finally:
        proc.run(["podman", "volume", "rm", "-f", other], timeout=60, check=False)
