"""Non-functional properties: one test per property of the profile
(``test_property[scaling.efficiency]``), each measured on the cluster and
judged against the profile's reference (refarch.judge.properties.judge).

Each measurement is a function below, registered under the property id; it
returns a :class:`refarch.judge.properties.Measurement` or skips with the reason
the property cannot run on this cluster.  Every property of the profile is
recorded in the results, skipped ones included.
"""

import warnings

import pytest

from refarch.clouds import exposure
from refarch.clouds import local as localcloud
from refarch.judge import figures, properties
from refarch.judge.properties import Measurement
from refarch.pytest.state import STATE
from refarch.pytest.workloads import timed

pytestmark = [pytest.mark.integration, pytest.mark.run_phase("properties")]

MEASURES = {}


def measures(prop_id: str):
    """Register the decorated function as the measurement of ``prop_id``."""
    def register(func):
        MEASURES[prop_id] = func
        return func
    return register


def pytest_generate_tests(metafunc):
    if "property_id" in metafunc.fixturenames:
        state = metafunc.config.stash.get(STATE, None)
        ids = list(state.profile.property_specs()) if state else ["no-profile"]
        metafunc.parametrize("property_id", ids, ids=ids)


def _across_nodes(cluster) -> int:
    n = len(cluster.contract.node_names)
    if n == 1:
        pytest.skip("not run: the cluster has one node, nothing runs across nodes")
    return n


@measures("scaling.efficiency")
def _efficiency(request) -> Measurement:
    n = _across_nodes(request.getfixturevalue("cluster"))
    profile = request.getfixturevalue("profile")
    table = request.getfixturevalue("scaling_runs")
    row = next(r for r in table if r["world_size"] == n and r["batch_size"] == profile.smoke.batch_size)
    base, smoke = row["baseline"], profile.smoke
    return Measurement(row["efficiency"], {
        "efficiency_ci95": row["efficiency_ci95"], "scaling": table, "batch_size": row["batch_size"]},
        detail=(f" (95 % interval {100 * row['efficiency_ci95'][0]:.1f}-{100 * row['efficiency_ci95'][1]:.1f} %;"
                f" np={n} {row['images_per_sec']:.1f} images/sec, np=1 {base['median']:.1f} from the "
                f"{base['source']}; medians of the steps)"),
        error="; ".join(figures.problems(table, smoke.max_relative_width, smoke.max_baseline_drift)))


def _convergence_at_n(request) -> tuple[dict, int]:
    cluster = request.getfixturevalue("cluster")
    n = _across_nodes(cluster)
    return request.getfixturevalue("convergence_runs"), n


@measures("convergence.test_accuracy")
def _accuracy(request) -> Measurement:
    runs, n = _convergence_at_n(request)
    return Measurement(runs[n]["test_accuracy"], {
        "world_size": n, "test_samples": runs[n]["test_samples"], "log": runs[n].get("log"),
        "np1_test_accuracy": runs[1]["test_accuracy"]})


@measures("convergence.ranks_diverged")
def _diverged(request) -> Measurement:
    runs, n = _convergence_at_n(request)
    hashes = runs[n]["weight_sha256"]
    diverged = properties.diverged_ranks(hashes)
    hosts = runs[n]["hosts"]
    detail = ""
    if diverged:
        detail = (" (after training, the weights of " + ", ".join(f"rank {r} on {hosts[r]}" for r in diverged)
                  + f" differ from rank 0's on {hosts[0]}: the ranks did not average their gradients)")
    return Measurement(len(diverged), {"world_size": n, "weight_sha256": hashes, "hosts": hosts,
                                       "log": runs[n].get("log")}, detail)


@measures("convergence.loss_gap")
def _loss_gap(request) -> Measurement:
    runs, n = _convergence_at_n(request)
    value = properties.loss_gap(runs[n]["train_loss"], runs[1]["train_loss"])
    return Measurement(value, {"train_loss": {"1": runs[1]["train_loss"], str(n): runs[n]["train_loss"]},
                               "steps": runs[n]["steps"], "logs": [runs[1].get("log"), runs[n].get("log")]},
                       detail=f" (train loss np=1 {runs[1]['train_loss']:.4f}, np={n} {runs[n]['train_loss']:.4f})")


@measures("availability.restart_healthy_s")
def _restart(request) -> Measurement:
    run = request.getfixturevalue("restart_run")
    if not run.get("checks_passed"):
        pytest.fail(f"{run['node']} healthy after {run['healthy_s']} s, but no check passed after its restart "
                    f"({run['checks_run']} run): nothing proves it works again")
    if run["failed"]:
        pytest.fail(f"{run['node']} healthy after {run['healthy_s']} s, but checks fail after its restart "
                    "(without Ansible): " + "; ".join(f"{t}: {m}" for t, m in sorted(run["failed"].items())))
    return Measurement(run["healthy_s"], run, f" ({run['node']} down {run['down_after_stop_s']} s after the stop; "
                                              f"then {run['checks_passed']} checks passed)")


def _elastic(request, mode: str = "stop") -> dict:
    _across_nodes(request.getfixturevalue("cluster"))
    modes = request.getfixturevalue("profile").availability.failure_modes
    if mode not in modes:
        pytest.skip(f"failure mode {mode} not in availability.failure_modes ({', '.join(modes)})")
    return request.getfixturevalue("elastic_runs")(mode)


def _recovery_of(mode: str):
    def measure(request) -> Measurement:
        run = _elastic(request, mode)
        how = {"stop": "stopped", "kill": "killed", "partition": "cut off"}[mode]
        gloo = f"; the survivors' Gloo timeout {run['gloo_timeout_s']:g} s" if run.get("gloo_timeout_s") else ""
        return Measurement(run["recovery_s"], run, f" ({run['victim']} {how} while listed; world sizes "
                                                   f"{run['world_sizes']}; seen: {run['failure_seen'][0]}{gloo})")
    return measure


def _rejoin_of(mode: str):
    def measure(request) -> Measurement:
        run = _elastic(request, mode)
        if run["rejoin_s"] is None:
            pytest.fail(run["rejoin_error"])
        back = "healthy again" if mode != "partition" else "reconnected and healthy"
        return Measurement(run["rejoin_s"], run, f" ({run['victim']} {back}, listed throughout; world sizes "
                                                 f"{run['world_sizes']})")
    return measure


for _id, _mode in properties.FAILURE_MODE_OF.items():
    if _id.endswith("recovery_s"):
        measures(_id)(_recovery_of(_mode))
    elif _id.endswith("rejoin_s"):
        measures(_id)(_rejoin_of(_mode))


@measures("availability.steps_repeated")
def _repeated(request) -> Measurement:
    run = _elastic(request)
    every = request.getfixturevalue("profile").availability.commit_every
    resets = "; ".join(f"rank 0 went back from step {high} to {back}" for high, back in run.get("step_resets", []))
    return Measurement(run["steps_repeated"], run, f" (commit every {every} steps{'; ' + resets if resets else ''})")


@measures("communication.busbw_to_tcp")
def _busbw(request) -> Measurement:
    _across_nodes(request.getfixturevalue("cluster"))
    pairs = request.getfixturevalue("communication_runs")
    errors = [p["error"] for p in pairs if "error" in p]
    if errors:
        pytest.fail("node pairs not measured: " + "; ".join(errors))
    worst = min(pairs, key=lambda p: p["sizes"][-1]["busbw_to_tcp"])
    last = worst["sizes"][-1]
    detail = (f" ({'-'.join(worst['pair'])}: allreduce busbw {last['busbw_Bps'] / 1e9:.2f} GB/s at "
              f"{last['bytes'] / (1 << 20):g} MiB, raw TCP {worst['tcp_Bps'] / 1e9:.2f} GB/s)")
    return Measurement(last["busbw_to_tcp"], {"pairs": pairs}, detail)


@pytest.fixture(scope="module")
def exposure_scans(cluster, results) -> dict:
    """{probe kind: ScanResult} from the admin and the outside probe (local
    cloud, refarch.clouds.exposure.survey); each result also carries ``dropped``
    (packets the run's network policy dropped during that probe's scan),
    ``reached`` and ``arrived`` per node (its packets at the node's edge,
    and inside it) and the listening ports its packets reached."""
    contract = cluster.contract
    if contract.cloud != "local":
        pytest.skip(f"not run: the exposure probes are built for the local cloud, not {contract.cloud}")
    probe_subnet = cluster.rundir.read_meta().get("probe_subnet")
    table = contract.network_policy.get("table")
    if not probe_subnet or not table:
        # A local cluster without them cannot be surveyed: a defect of its
        # deployment (or of a suite too old for it), never a skip.
        missing = " and ".join(what for what, have in (("a probe subnet (run.json)", probe_subnet),
                                                        ("a network policy table (contract)", table)) if not have)
        pytest.fail(f"run {cluster.run_id} has no {missing}: the exposure survey cannot run; deploy it again "
                    "with this suite")
    probes = exposure.plan_probes(cluster.run_id, localcloud.probe_ranges(probe_subnet))
    nodes = {n.address: n.name for n in contract.nodes}
    exposure.remove_probes(cluster.run_id)  # what an interrupted scan of this run left
    with timed(results, "properties"):
        try:
            for probe in probes:
                exposure.create_probe(probe)
            scans = exposure.survey(cluster.run_id, probes, nodes,
                                    {name: f"{cluster.run_id}-{name}" for name in nodes.values()}, table)
        finally:
            exposure.remove_probes(cluster.run_id)
    results.exposure.update({kind: r.as_dict() for kind, r in scans.items()})
    return scans


def _names(cluster) -> dict[str, str]:
    return {n.address: n.name for n in cluster.contract.nodes}


def _reached_every_node(scan, names: dict[str, str]) -> None:
    """Fail unless the probe's packets reached every node's edge (counted
    per destination on this host): a scan that reached one node proves
    nothing about the others."""
    missed = [names[a] for a in names if scan.reached.get(a, 0) == 0]
    if missed:
        pytest.fail(f"the {scan.probe.kind} probe ({scan.probe.address}) scanned, but none of its packets "
                    f"reached {', '.join(missed)}: the scan proves nothing there")


@measures("exposure.outside_open_ports")
def _outside(request) -> Measurement:
    cluster, profile = request.getfixturevalue("cluster"), request.getfixturevalue("profile")
    scan = request.getfixturevalue("exposure_scans")["outside"]
    _reached_every_node(scan, _names(cluster))
    found = exposure.unexpected(scan, profile.expect.exposure.outside, _names(cluster))
    detail = f" (outside probe {scan.probe.address}: " + ", ".join(found) + " open)" if found else ""
    return Measurement(len(found), scan.as_dict(), detail)


@measures("exposure.admin_unexpected_ports")
def _admin(request) -> Measurement:
    cluster, profile = request.getfixturevalue("cluster"), request.getfixturevalue("profile")
    scan = request.getfixturevalue("exposure_scans")["admin"]
    names = _names(cluster)
    _reached_every_node(scan, names)
    unreached = [names[a] for a in names if "tcp/22" not in scan.open_ports.get(a, [])]
    if "tcp/22" in profile.expect.exposure.admin and unreached:
        pytest.fail(f"the admin probe ({scan.probe.address}, {scan.probe.cidr}) cannot reach sshd on "
                    f"{', '.join(unreached)}: the admin range must reach tcp/22 (and the scan proves nothing)")
    found = exposure.unexpected(scan, profile.expect.exposure.admin, names)
    detail = f" (admin probe {scan.probe.address}: " + ", ".join(found) + " open)" if found else ""
    return Measurement(len(found), scan.as_dict(), detail)


@measures("exposure.password_auth_nodes")
def _password(request) -> Measurement:
    cluster = request.getfixturevalue("cluster")
    scan = request.getfixturevalue("exposure_scans")["admin"]
    names = _names(cluster)
    unanswered = [names[a] for a in names if a not in scan.ssh_methods]
    if unanswered:
        pytest.fail(f"sshd on {', '.join(unanswered)} named no authentication methods to the admin probe "
                    f"({scan.probe.address}): nmap ssh-auth-methods got no answer")
    found = exposure.password_offered(scan, names)
    detail = " (" + "; ".join(found) + " offered to the admin probe)" if found else ""
    return Measurement(len(found), {"ssh_methods": {names[a]: m for a, m in scan.ssh_methods.items()}}, detail)


def test_property(property_id, request, profile, results, run_state):
    """The property, measured on this cluster, is within the profile's
    reference (fails with figure, bound and source; warns in the band)."""
    spec = profile.property_specs()[property_id]
    if spec.skip:
        results.add_property(property_id, spec, "skip", message=f"profile {profile.name}: {spec.skip}")
        pytest.skip(f"profile {profile.name}: {spec.skip}")
    if property_id.split(".")[0] in properties.LONG_GROUPS and not request.config.getoption("refarch_long"):
        reason = "not run: stops and starts nodes; measured with --long-properties (tox -e availability)"
        results.add_property(property_id, spec, "skip", message=reason)
        pytest.skip(reason)
    if property_id not in MEASURES:
        results.add_property(property_id, spec, "skip", message="no measurement in this suite version")
        pytest.skip(f"{property_id}: no measurement in this suite version")
    try:
        m = MEASURES[property_id](request)
    except pytest.skip.Exception as exc:
        results.add_property(property_id, spec, "skip", message=str(exc))
        raise
    except BaseException as exc:
        results.add_property(property_id, spec, "error", message=f"not measured: {exc}"[:2000])
        raise
    verdict = properties.judge(property_id, m.value, spec, m.detail, m.error)
    message = verdict.message
    measured = m.value if properties.is_finite_number(m.value) else None  # JSON has no NaN
    results.add_property(property_id, spec, verdict.status, measured, message,
                         {"run_id": run_state.run_id, **m.evidence})
    node = getattr(request, "node", None)
    if node is not None:  # JUnit <properties> of this test case
        node.user_properties += [("measured", measured), ("unit", spec.unit), ("verdict", verdict.status),
                                 ("reference", spec.reference.model_dump_json(exclude_none=True)),
                                 ("source", spec.source.text + (f" {spec.source.url}" if spec.source.url else ""))]
    if verdict.status == "warn":
        warnings.warn(message, stacklevel=1)
    assert verdict.status not in ("fail", "error"), message
