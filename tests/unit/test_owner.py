"""Ownership of a run is decided from its labels, the same from every
checkout: a live owner or a kept run is never stale."""

import json
import os
import socket
import subprocess
import sys

from refarch import owner
from refarch.clouds import local as localcloud
from refarch.owner import Owner, stale_verdict


def _labels(tmp_path, **change):
    o = Owner.current(tmp_path)
    labels = {**o.labels(), **change}
    return labels


def test_labels_round_trip(tmp_path):
    o = Owner.current(tmp_path)
    assert Owner.from_labels(o.labels()) == o
    assert o.labels()[owner.LABEL_RUNDIR] == str(tmp_path.resolve())


def test_a_live_owner_is_never_stale(tmp_path):
    stale, reason = stale_verdict(_labels(tmp_path))
    assert not stale and f"owner process {os.getpid()}" in reason and "alive" in reason


def test_a_dead_owner_is_stale(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    dead = Owner(socket.gethostname(), child.pid, f"{owner.boot_id()}:1", str(tmp_path))
    stale, reason = stale_verdict(dead.labels())
    assert stale and "is gone" in reason


def test_a_reused_pid_is_not_the_owner(tmp_path):
    # Our own pid, but another start time: the owner it names has exited.
    labels = _labels(tmp_path, **{owner.LABEL_START: f"{owner.boot_id()}:1"})
    assert stale_verdict(labels)[0]


def test_an_owner_of_another_boot_is_gone(tmp_path):
    labels = _labels(tmp_path, **{owner.LABEL_START: "another-boot:123"})
    assert stale_verdict(labels)[0]


def test_a_kept_run_in_another_checkout_is_spared(tmp_path):
    other = tmp_path / "other-checkout" / "runs" / "hvd-x-abcdef"
    other.mkdir(parents=True)
    (other / "run.json").write_text(json.dumps({"kept": True}))
    labels = _labels(other, **{owner.LABEL_START: f"{owner.boot_id()}:1"})
    stale, reason = stale_verdict(labels)
    assert not stale and "kept" in reason and str(other) in reason
    assert stale_verdict(labels, include_kept=True)[0]


def test_an_owner_on_another_host_is_left_alone(tmp_path):
    labels = _labels(tmp_path, **{owner.LABEL_HOST: "elsewhere", owner.LABEL_START: "x:1"})
    assert not stale_verdict(labels)[0]


def test_resources_without_owner_labels_are_left_alone():
    stale, reason = stale_verdict({"refarch.run_id": "hvd-x-abcdef"})
    assert not stale and "no owner labels" in reason


def test_subnet_reservations_keep_concurrent_runs_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("REFARCH_MACHINE_DIR", str(tmp_path / "machine"))
    me = Owner.current(tmp_path)
    first = localcloud.reserve_subnet("10.213.0.0/16", 24, "hvd-a-aaaaaa", me, used=lambda: [])
    second = localcloud.reserve_subnet("10.213.0.0/16", 24, "hvd-b-bbbbbb", me, used=lambda: [])
    assert (first, second) == ("10.213.0.0/24", "10.213.1.0/24")
    localcloud.release_subnet("hvd-a-aaaaaa")
    assert localcloud.reserve_subnet("10.213.0.0/16", 24, "hvd-c-cccccc", me, used=lambda: []) == "10.213.0.0/24"


def test_a_dead_owners_reservation_is_free_again(tmp_path, monkeypatch):
    monkeypatch.setenv("REFARCH_MACHINE_DIR", str(tmp_path / "machine"))
    dead = Owner(socket.gethostname(), 1, f"{owner.boot_id()}:0", str(tmp_path))
    localcloud.reserve_subnet("10.213.0.0/16", 24, "hvd-a-aaaaaa", dead, used=lambda: [])
    me = Owner.current(tmp_path)
    assert localcloud.reserve_subnet("10.213.0.0/16", 24, "hvd-b-bbbbbb", me, used=lambda: []) == "10.213.0.0/24"


def test_runs_made_for_a_runner_belong_to_it_and_go_stale_when_it_dies(tmp_path, monkeypatch):
    """A role-scenario runner's Molecule create step (`refarch up`, `refarch vm
    up`) makes nodes for the runner: they carry its pid, are not kept, and are
    stale once it is gone (SIGKILL leaves no teardown)."""
    runner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        monkeypatch.setenv(owner.OWNER_ENV, str(runner.pid))
        assert owner.delegated()
        made = Owner.current(tmp_path)
        assert made.pid == runner.pid and made.alive()
        (tmp_path / "run.json").write_text(json.dumps({"kept": not owner.delegated()}))
        assert stale_verdict(made.labels()) == (False, f"owner process {runner.pid} on {made.host} is alive "
                                                       f"({tmp_path.resolve()})")
    finally:
        runner.kill()
        runner.wait()
    stale, reason = stale_verdict(made.labels())
    assert stale and f"owner process {runner.pid}" in reason and "gone" in reason
