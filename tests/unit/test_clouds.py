"""The cloud drivers, offline: both match the CloudDriver protocol, their
prepare returns what it made, Terraform inputs match each root module's
variables, and the OpenStack driver's prepare/sweep/leak check run against
openstacksdk fakes."""

import contextlib
import inspect
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from openstack.compute.v2 import flavor as flavor_mod
from openstack.compute.v2 import server as server_mod

from refarch.clouds import drivers as clouds
from refarch.clouds import local as localcloud
from refarch.clouds import openstack as ostk
from refarch.clouds.protocol import CloudDriver, Prepared, RunContext
from refarch.cluster import Cluster
from refarch.errors import NotSupported, PreflightError, RefarchError
from refarch.profile import load_profile
from refarch.run import RunDir
from tests.unit.test_contract_modules import blocks
from tests.unit.test_openstack import fake_conn, populate_run, res, set_quotas


@pytest.fixture
def rundir(tmp_path, monkeypatch):
    monkeypatch.setenv("REFARCH_RUNS_DIR", str(tmp_path / "runs"))
    return RunDir.create("hvd-ci-abc123")


def fake_cluster(profile_name, rundir, image_tag="localhost/refarch-node:x"):
    """The run context a driver is given (nothing of the Cluster else)."""
    return RunContext(rundir.run_id, load_profile(profile_name), rundir,
                      phase=lambda name: contextlib.nullcontext(), image_tag=image_tag)


@pytest.mark.parametrize("module, driver", [("local", clouds.LocalCloud), ("openstack", clouds.OpenStackCloud)])
def test_terraform_inputs_match_the_module_variables(module, driver, rundir, monkeypatch, tmp_path):
    monkeypatch.setattr(localcloud, "used_subnets", lambda: [])
    cluster = fake_cluster("local" if module == "local" else "openstack-v100", rundir)
    tf_vars = driver().tf_vars(cluster, tmp_path / "id_ed25519", tmp_path / "known_hosts")
    variables = blocks(module, "variables.tf", "variable")
    assert set(tf_vars) <= set(variables), f"unknown inputs: {set(tf_vars) - set(variables)}"
    required = {name for name, body in variables.items() if "default" not in body}
    assert required <= set(tf_vars), f"missing inputs: {required - set(tf_vars)}"


def protocol_members() -> list[str]:
    return sorted(name for name, value in vars(CloudDriver).items()
                  if not name.startswith("_") and callable(getattr(CloudDriver, name)))


def test_the_protocol_declares_what_the_callers_call():
    assert {"preflight", "sweep_stale", "prepared", "prepare", "tf_vars", "tf_env", "ansible_vars", "stop_node",
            "start_node", "fail_node", "restore_node", "node_state", "node_console", "await_nodes", "apply_failure", "survey_exposure", "sweep",
            "leaks", "finish"} == set(
                protocol_members())
    for name in protocol_members():
        assert inspect.getdoc(getattr(CloudDriver, name)), f"CloudDriver.{name} has no docstring"


@pytest.mark.parametrize("driver", [clouds.LocalCloud, clouds.OpenStackCloud])
def test_each_driver_has_every_protocol_method_with_its_parameters(driver):
    for name in protocol_members():
        want = list(inspect.signature(getattr(CloudDriver, name)).parameters)
        have = list(inspect.signature(getattr(driver, name)).parameters)
        assert have == want, f"{driver.__name__}.{name}{have}: the protocol has {want}"
        static = isinstance(inspect.getattr_static(CloudDriver, name), staticmethod)
        assert isinstance(inspect.getattr_static(driver, name), staticmethod) == static, name
    assert isinstance(driver(), CloudDriver) and isinstance(driver.name, str)


def test_the_faulty_driver_is_a_cloud_driver_too(monkeypatch):
    monkeypatch.setenv(clouds.FAULT_DRIVER_ENV, "stop-ignored")
    driver = clouds.driver_for(load_profile("local"))
    assert isinstance(driver, clouds.StopIgnored) and isinstance(driver, CloudDriver)
    for name in protocol_members():
        assert callable(getattr(driver, name)), name


def fake_builds(monkeypatch, tmp_path):
    """The image and wheelhouse builds, faked: what they were asked."""
    calls = []

    def ensure_image(log, timeout_s):
        calls.append(("image", log.name, timeout_s))
        return "localhost/refarch-node:0123456789ab"

    def ensure_wheelhouse(tag, log, timeout_s, ca_files=None):
        calls.append(("wheel", tag, log.name, timeout_s))
        return tmp_path / "cache" / "wheelhouse" / "k"

    monkeypatch.setattr(clouds.image, "ensure_image", ensure_image)
    monkeypatch.setattr(clouds.wheelhouse, "ensure_wheelhouse", ensure_wheelhouse)
    return calls


def test_the_local_prepare_returns_the_image_and_wheelhouse_and_records_them(rundir, monkeypatch, tmp_path):
    calls = fake_builds(monkeypatch, tmp_path)
    cluster = fake_cluster("local", rundir, image_tag=None)
    made = clouds.LocalCloud().prepare(cluster)
    wheels = tmp_path / "cache" / "wheelhouse" / "k"
    assert made == Prepared(image_tag="localhost/refarch-node:0123456789ab", wheelhouse=wheels)
    assert cluster.image_tag is None and cluster.wheelhouse is None  # the caller keeps them
    t = cluster.profile.timeouts_s
    assert calls == [("image", "image.log", t.image), ("wheel", made.image_tag, "wheel.log", t.wheel)]
    meta = rundir.read_meta()
    assert meta["image"] == made.image_tag and Path(meta["wheelhouse"]) == wheels


def test_the_cluster_keeps_what_prepare_made(rundir, monkeypatch, tmp_path):
    monkeypatch.delenv(clouds.FAULT_DRIVER_ENV, raising=False)
    fake_builds(monkeypatch, tmp_path)
    rundir.update_meta(profile="local", overrides={}, cloud="local", kept=False, phases={})
    cluster = Cluster(load_profile("local"), rundir)
    assert not cluster.prepared
    made = cluster.prepare()
    assert (cluster.image_tag, cluster.wheelhouse) == (made.image_tag, made.wheelhouse) and cluster.prepared
    assert cluster.driver.ansible_vars(cluster.context) == {"horovod_wheelhouse_src": str(made.wheelhouse)}
    attached = Cluster.attach(rundir.run_id)
    assert (attached.image_tag, attached.wheelhouse) == (made.image_tag, made.wheelhouse)
    assert set(cluster.phases()) == {"image", "wheel"}
    unprepared = Cluster(load_profile("local"), rundir)  # the inventory prepares it first; the driver never does
    with pytest.raises(RefarchError, match="has no wheelhouse: prepare it first"):
        unprepared.driver.ansible_vars(unprepared.context)
    assert unprepared.image_tag is None


def test_a_driver_cannot_write_into_the_run_it_is_given(rundir):
    run = fake_cluster("local", rundir)
    with pytest.raises(AttributeError):
        run.wheelhouse = Path("/elsewhere")
    assert not hasattr(run, "prepare") and not hasattr(run, "driver")


def openstack_driver(monkeypatch, conn):
    monkeypatch.setattr(ostk, "connect", lambda cloud, config_file=None: conn)
    conn.compute.find_flavor.side_effect = None
    conn.compute.find_flavor.return_value = res(flavor_mod.Flavor, vcpus=16, ram=65536)
    conn.current_project_id = "p1"
    return clouds.OpenStackCloud()


def test_openstack_prepare_checks_quota_then_records_the_baseline(rundir, monkeypatch):
    conn = fake_conn()
    set_quotas(conn, cores=(100, 0), floating=(5, 0), gigabytes=(5000, 0))
    conn.compute.servers.return_value = [res(server_mod.Server, name="someone-elses-vm")]
    driver = openstack_driver(monkeypatch, conn)
    made = driver.prepare(fake_cluster("openstack-v100", rundir))
    assert made.baseline == rundir.path / "baseline.json" and made.image_tag is None
    baseline = json.loads(made.baseline.read_text())
    assert len(baseline["servers"]) == 1 and set(baseline) == set(ostk.KINDS)


def test_openstack_prepare_stops_before_anything_on_a_short_quota(rundir, monkeypatch):
    conn = fake_conn()
    set_quotas(conn, cores=(16, 0), floating=(5, 0), gigabytes=(5000, 0))
    driver = openstack_driver(monkeypatch, conn)
    with pytest.raises(PreflightError, match="cores: need 32, 16 of 16 free"):
        driver.prepare(fake_cluster("openstack-v100", rundir))
    assert not (rundir.path / "baseline.json").exists()
    conn.network.create_network.assert_not_called()


def test_openstack_sweep_deletes_the_runs_resources_and_leaks_compare_to_baseline(rundir, monkeypatch):
    conn = fake_conn()
    driver = openstack_driver(monkeypatch, conn)
    cluster = fake_cluster("openstack-v100", rundir)
    (rundir.path / "baseline.json").write_text(json.dumps({k: [] for k in ostk.KINDS}))
    populate_run(conn, run="hvd-ci-abc123", created="2026-11-29T06:00:00Z")
    swept = driver.sweep(cluster, rundir.logs / "teardown.log")
    assert "servers" in swept and "volumes" in swept
    conn.compute.delete_server.assert_called()
    leaks = driver.leaks(cluster)
    assert "prod-db" in " ".join(leaks["servers"])  # new since the (empty) baseline: reported


def test_a_driver_whose_stop_is_ignored_ignores_a_power_off_too_but_cuts_a_node_off():
    calls = []
    inner = SimpleNamespace(fail_node=lambda cluster, name, mode: calls.append(mode))
    driver = clouds.StopIgnored(inner)
    for mode in clouds.FAILURE_MODES:
        driver.fail_node(None, "node2", mode)
    assert calls == ["partition"]


def test_the_partition_ruleset_drops_all_but_loopback_ahead_of_every_other_table():
    ruleset = localcloud.partition_ruleset()
    assert "delete table inet refarch_partition" in ruleset  # idempotent: made afresh
    for hook, iface in (("input", "iifname"), ("output", "oifname")):
        assert f'type filter hook {hook} priority -400; policy accept; {iface} "lo" accept; drop;' in ruleset


def test_a_local_power_cut_silences_the_network_before_the_kill(monkeypatch):
    """SIGKILL alone lets the kernel send a FIN for every socket of the
    killed processes (measured: the peers went on within 0.8 s, as after a
    clean stop); a power cut sends nothing."""
    calls = []
    monkeypatch.setattr(clouds.proc, "in_netns", lambda container, *cmd, **kw: calls.append(("netns", container, cmd)))
    monkeypatch.setattr(clouds.proc, "run", lambda cmd, **kw: calls.append(("run", cmd)))
    cluster = SimpleNamespace(run_id="hvd-x-abc123")
    clouds.LocalCloud().fail_node(cluster, "node2", "kill")
    assert calls[0] == ("netns", "hvd-x-abc123-node2", ("nft", "-f", "-"))
    assert calls[1] == ("run", ["podman", "kill", "--signal", "KILL", "hvd-x-abc123-node2"])
    with pytest.raises(ValueError, match="failure mode 'reboot': not one of stop, kill, partition"):
        clouds.LocalCloud().fail_node(cluster, "node2", "reboot")


def test_a_loaded_profile_is_neither_read_nor_preflighted_again(monkeypatch, tmp_path):
    """The pytest plugin loads and preflights the profile once, at configure
    time; the cluster it creates or attaches takes that profile as it is."""
    from refarch import cluster as cluster_mod

    monkeypatch.setenv("REFARCH_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv(clouds.FAULT_DRIVER_ENV, raising=False)
    profile = load_profile("local")
    calls = []
    monkeypatch.setattr(cluster_mod, "load_profile", lambda *a, **k: calls.append(("load", a)) or profile)
    monkeypatch.setattr(cluster_mod, "preflight", lambda p: calls.append(("preflight",)))
    monkeypatch.setattr(clouds.LocalCloud, "sweep_stale", staticmethod(lambda out: None))
    made = Cluster.create("local", {}, run_id="hvd-test-once", loaded=profile)
    assert made.profile is profile and calls == []
    assert Cluster.attach("hvd-test-once", loaded=profile).profile is profile and calls == []
    Cluster.attach("hvd-test-once")
    assert calls == [("load", ("local", {}))]


def test_what_differs_between_clouds_is_asked_of_the_driver(rundir):
    """The cloud-specific branches live in the drivers: a console into a
    node without SSH, the exposure survey, and whether the nodes run on this
    machine (the side-by-side comparison)."""
    cluster = SimpleNamespace(run_id="hvd-x-abc123", rundir=rundir,
                              contract=SimpleNamespace(network_policy={"table": "refarch_x"}, nodes=[]))
    local, openstack = clouds.LocalCloud(), clouds.OpenStackCloud()
    assert local.node_console(cluster, "node2") == ["podman", "exec", "hvd-x-abc123-node2"]
    assert openstack.node_console(cluster, "node2") is None
    assert clouds.DRIVERS["local"].on_this_machine and not clouds.DRIVERS["openstack"].on_this_machine
    on_a_cloud = SimpleNamespace(**vars(cluster), profile=SimpleNamespace(openstack=SimpleNamespace(all_in_one=None)))
    with pytest.raises(NotSupported, match="on another OpenStack cloud the suite has no host outside the cluster"):
        openstack.survey_exposure(on_a_cloud)
    with pytest.raises(RefarchError, match=r"run hvd-x-abc123 has no a probe subnet \(run.json\): the exposure"):
        local.survey_exposure(cluster)
