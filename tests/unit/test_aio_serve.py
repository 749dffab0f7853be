"""Which all-in-one a run is reached on (refarch.clouds.aio.serve_run), and
destroying a run whose all-in-one was stopped (refarch.cluster.Cluster.destroy)."""

from types import SimpleNamespace

import pytest

from refarch.clouds import aio
from refarch.cluster import Cluster
from refarch.errors import CloudGone
from refarch.profile import load_profile
from refarch.run import RunDir


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("REFARCH_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv(aio.ENV_RUN_ID, raising=False)
    monkeypatch.delenv("OS_CLIENT_CONFIG_FILE", raising=False)
    return tmp_path / "runs"


def an_aio(run_id: str, destroyed: bool = False) -> aio.AllInOne:
    rundir = RunDir.create(run_id)
    (rundir.path / "clouds.yaml").write_text("clouds: {}\n")
    rundir.update_meta(address="10.215.0.2", mode="guests", destroyed=destroyed)
    return aio.load(rundir)


def containers(monkeypatch, *running: aio.AllInOne) -> None:
    """podman lists the containers of ``running`` (and no others)."""
    def run(cmd, **_kwargs):
        assert cmd[:2] == ["podman", "ps"], cmd
        return SimpleNamespace(stdout="".join(f"{a.container}\n" for a in running))

    monkeypatch.setattr(aio.proc, "run", run)


def test_a_run_is_reached_on_its_own_all_in_one_whichever_was_chosen_before(runs, monkeypatch):
    own, other = an_aio("aio-test-own001"), an_aio("aio-test-oth001")
    containers(monkeypatch, own, other)
    monkeypatch.setenv(aio.ENV_RUN_ID, other.run_id)
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(other.clouds_yaml))
    aio.serve_run({"run_id": "hvd-test-run001", "all_in_one": own.run_id})
    assert aio.current().run_id == own.run_id
    import os

    assert os.environ["OS_CLIENT_CONFIG_FILE"] == str(own.clouds_yaml)


@pytest.mark.parametrize("how", ["destroyed", "container gone", "folder gone", "named by the environment"])
def test_a_run_whose_all_in_one_was_stopped_is_named_gone(runs, monkeypatch, how):
    stopped = an_aio("aio-test-gone01", destroyed=how in ("destroyed", "named by the environment"))
    containers(monkeypatch, *([] if how == "container gone" else [stopped]))
    name = "aio-test-nothere" if how == "folder gone" else stopped.run_id
    if how == "named by the environment":  # a parent process chose it while it ran
        monkeypatch.setenv(aio.ENV_RUN_ID, stopped.run_id)
        monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(stopped.clouds_yaml))
    with pytest.raises(CloudGone, match=f"^run hvd-test-run001 was deployed on the all-in-one {name}, which was "
                                        "stopped: its servers, networks and volumes went with it$"):
        aio.serve_run({"run_id": "hvd-test-run001", "all_in_one": name})
    if how != "named by the environment":
        with pytest.raises(Exception, match="is unset"):
            aio.current()


def test_destroying_a_run_whose_all_in_one_was_stopped_removes_nothing_and_says_why(runs, monkeypatch):
    stopped = an_aio("aio-test-gone02", destroyed=True)
    containers(monkeypatch)
    from refarch.tools import providers

    def no_build(*_args, **_kwargs):
        raise AssertionError("the providers were built for a cloud that is gone")

    monkeypatch.setattr(providers, "ensure_providers", no_build)
    rundir = RunDir.create("hvd-test-run002")
    rundir.update_meta(profile="openstack-aio-guests", overrides={}, cloud="openstack", kept=True, phases={},
                       all_in_one=stopped.run_id)
    cluster = Cluster(load_profile("openstack-aio-guests"), rundir)
    report = cluster.destroy()
    assert report == {"cloud_gone": "run hvd-test-run002 was deployed on the all-in-one aio-test-gone02, which was "
                                    "stopped: its servers, networks and volumes went with it",
                      "swept": {}, "state": [], "leaks": {}}
    meta = rundir.read_meta()
    assert meta["destroyed"] and not meta["kept"] and meta["teardown"] == report
