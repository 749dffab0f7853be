"""Availability offline: an elastic job's log recorded on the local cloud
(node2 stopped mid-training, started and listed again) parsed into world
sizes and repeated steps, and the availability properties fed runs in
place of a cluster."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from refarch import properties
from refarch.judge import checks
from refarch.judge.results import Results
from refarch.profile import load_profile
from refarch.pytest import availability, elastic
from tests.integration import test_properties

DATA = Path(__file__).parent / "data" / "availability"


def _recorded_steps():
    return elastic._steps((DATA / "elastic-node2-stopped.log").read_text(encoding="utf-8"))


def test_the_recorded_job_went_from_two_to_one_and_back():
    steps = _recorded_steps()
    sizes = [s["size"] for i, s in enumerate(steps) if i == 0 or s["size"] != steps[i - 1]["size"]]
    assert sizes == [2, 1, 2]
    assert 0 < elastic.steps_repeated(steps) <= 10  # at most the commit interval


def test_steps_repeated_after_a_restore():
    steps = [{"step": s} for s in (0, 1, 2, 3, 4, 5, 6, 3, 4, 5, 6, 7)]
    assert elastic.steps_repeated(steps) == 4  # 3..6 trained twice
    assert elastic.steps_repeated([{"step": s} for s in range(5)]) == 0
    assert elastic.step_resets(steps) == [(6, 3)]


def _judge(prop_id, **fixtures):
    cluster = SimpleNamespace(contract=SimpleNamespace(node_names=["node1", "node2"]))
    values = {"cluster": cluster, "profile": load_profile("local"), **fixtures}
    request = SimpleNamespace(getfixturevalue=lambda name: values[name],
                              config=SimpleNamespace(getoption=lambda name: True))
    results = Results("r", "local", "local")
    test_properties.test_property(prop_id, request, values["profile"], results, SimpleNamespace(run_id="r"))
    return results.properties[-1]


ELASTIC = {"world_sizes": [2, 1, 2], "recovery_s": 0.33, "rejoin_s": 23.96, "rejoin_error": "", "steps_repeated": 8, "steps": 160,
           "victim": "node2", "log": "runs/r/logs/elastic.log", "down_after_stop_s": 0.0,
           "failure_seen": ["Process 1 exit with status code 255."]}


@pytest.mark.parametrize("prop_id", ["availability.recovery_s", "availability.rejoin_s",
                                     "availability.steps_repeated"])
def test_a_recorded_elastic_run_passes(prop_id):
    assert _judge(prop_id, elastic_runs=lambda mode: ELASTIC)["verdict"] == "pass"


def test_more_steps_repeated_than_the_commit_interval_fail():
    with pytest.raises(AssertionError, match=r"availability.steps_repeated = 25 steps \(commit every 10 steps\) "
                                             r"is above the upper bound 10"):
        _judge("availability.steps_repeated", elastic_runs=lambda mode: {**ELASTIC, "steps_repeated": 25})


def test_repeated_steps_name_where_rank_0_went_back():
    with pytest.raises(AssertionError, match=r"steps_repeated = 25 steps \(commit every 10 steps; rank 0 went back "
                                             r"from step 24 to 0\)"):
        _judge("availability.steps_repeated",
               elastic_runs=lambda mode: {**ELASTIC, "steps_repeated": 25, "step_resets": [(24, 0)]})


def test_a_slow_recovery_fails():
    with pytest.raises(AssertionError, match=r"availability.recovery_s = 75 seconds \(node2 stopped while listed; world "
                                             r"sizes \[2, 1, 2\]; seen: Process 1 exit with status code 255\.\) is above "
                                             r"the upper bound"):
        _judge("availability.recovery_s", elastic_runs=lambda mode: {**ELASTIC, "recovery_s": 75})


def test_checks_that_fail_after_a_restart_are_named():
    run = {"node": "node2", "healthy_s": 1.4, "checks_run": 20, "checks_passed": 19, "junit": "x.xml",
           "down_after_stop_s": 0.0,
           "failed": {"test_shared_storage_mounted[node2]": "AssertionError: node2: nothing mounted at /shared"}}
    with pytest.raises(pytest.fail.Exception, match=r"node2 healthy after 1.4 s, but checks fail after its restart "
                                                     r"\(without Ansible\): test_shared_storage_mounted\[node2\]: "):
        _judge("availability.restart_healthy_s", restart_run=run)


def test_long_properties_are_skipped_with_the_reason_unless_asked_for():
    cluster = SimpleNamespace(contract=SimpleNamespace(node_names=["node1", "node2"]))
    request = SimpleNamespace(getfixturevalue=lambda name: cluster, config=SimpleNamespace(getoption=lambda n: False))
    results = Results("r", "local", "local")
    with pytest.raises(pytest.skip.Exception, match="--long-properties"):
        test_properties.test_property("availability.rejoin_s", request, load_profile("local"), results,
                                      SimpleNamespace(run_id="r"))
    assert results.properties[0]["verdict"] == "skip"


def test_a_node_that_never_rejoins_fails_rejoin_but_recovery_is_still_judged():
    never = {**ELASTIC, "world_sizes": [2, 1], "rejoin_s": None,
             "rejoin_error": "elastic job back at world size 2 after node2 was started again: not within 60 s; "
                             "it trains on at world size 1 (step 628)"}
    with pytest.raises(pytest.fail.Exception, match=r"not within 60 s; it trains on at world size 1"):
        _judge("availability.rejoin_s", elastic_runs=lambda mode: never)
    assert _judge("availability.recovery_s", elastic_runs=lambda mode: never)["verdict"] == "pass"


def test_a_restart_after_which_no_check_passed_proves_nothing():
    run = {"node": "node2", "healthy_s": 1.4, "checks_run": 0, "checks_passed": 0, "junit": "x.xml",
           "down_after_stop_s": 0.0, "failed": {}}
    with pytest.raises(pytest.fail.Exception, match=r"node2 healthy after 1.4 s, but no check passed after its "
                                                     r"restart \(0 run\): nothing proves it works again"):
        _judge("availability.restart_healthy_s", restart_run=run)


def test_the_recorded_job_printed_the_workers_failure():
    text = (DATA / "elastic-node2-stopped.log").read_text(encoding="utf-8")
    seen = checks.failure_evidence(text)
    assert seen and any("exit with status code 255" in line or "closed by" in line for line in seen), seen
    # A job that shrank without noticing a failure (a de-listed host) prints none.
    quiet = "\n".join(line for line in text.splitlines() if not checks.FAILURE_SEEN.search(line))
    assert checks.failure_evidence(quiet) == [] and elastic._steps(quiet)


class _Driver:
    def __init__(self, states):
        self.states = list(states)

    def node_state(self, cluster, name):
        return self.states.pop(0) if len(self.states) > 1 else self.states[0]


class _Host:
    def __init__(self, rcs):
        self.rcs = list(rcs)
        self.commands = []

    def run(self, command):
        self.commands.append(command)
        rc = self.rcs.pop(0) if len(self.rcs) > 1 else self.rcs[0]
        return SimpleNamespace(rc=rc, stdout="", stderr="")


def _cluster(states):
    nodes = {"node1": "10.0.0.10", "node2": "10.0.0.11"}
    contract = SimpleNamespace(node_names=list(nodes), node=lambda n: SimpleNamespace(address=nodes[n]))
    return SimpleNamespace(driver=_Driver(states), contract=contract, context=None)


def test_a_node_is_down_when_the_cloud_says_stopped_and_a_peer_gets_no_answer():
    host = _Host([1])  # bash: connection refused
    assert availability.still_up(_cluster(["stopped"]), {"node1": host}, "node2") == ""
    assert "/dev/tcp/10.0.0.11/22" in host.commands[0]
    assert availability.still_up(_cluster(["running"]), {"node1": _Host([124])}, "node2") == (
        "is running in the cloud although SSH from node1 gets no answer")


def test_a_stop_the_cloud_accepted_but_did_not_carry_out_is_named(monkeypatch):
    monkeypatch.setattr(availability.time, "sleep", lambda s: None)
    with pytest.raises(pytest.fail.Exception, match=r"node2 still answers SSH from node1 \(cloud state running\) "
                                                     r"0 s after stop_node returned: the node was never down"):
        availability.prove_down(_cluster(["running"]), {"node1": _Host([0])}, "node2", timeout_s=0)
    # Down on the third look: the seconds it took are returned.
    assert availability.prove_down(_cluster(["running", "running", "stopped"]), {"node1": _Host([0, 0, 1])},
                                "node2", timeout_s=30) >= 0


def test_the_faulty_driver_accepts_a_stop_and_does_nothing(monkeypatch):
    from refarch.clouds import drivers as clouds
    from refarch.errors import PreflightError

    monkeypatch.setenv(clouds.FAULT_DRIVER_ENV, "stop-ignored")
    driver = clouds.driver_for(load_profile("local"))
    assert isinstance(driver, clouds.StopIgnored) and driver.stop_node(None, "node2") is None
    assert driver.name == "local"  # everything else is the real driver's
    monkeypatch.setenv(clouds.FAULT_DRIVER_ENV, "nosuch")
    with pytest.raises(PreflightError, match="the only faulty driver is 'stop-ignored'"):
        clouds.driver_for(load_profile("local"))


class _StateDriver:
    def __init__(self, state):
        self.state = state

    def node_state(self, cluster, name):
        return self.state


def _failure_cluster(state, answers):
    contract = SimpleNamespace(node_names=["node1", "node2"],
                               node=lambda name: SimpleNamespace(address="10.0.0.11"))
    hosts = {"node1": SimpleNamespace(run=lambda cmd: SimpleNamespace(rc=0 if answers else 1))}
    return SimpleNamespace(contract=contract, driver=_StateDriver(state), context=None), hosts


@pytest.mark.parametrize("mode, state, answers, missing", [
    ("stop", "stopped", False, ""),
    ("kill", "stopped", False, ""),
    ("partition", "running", False, ""),
    ("stop", "running", True, "still answers SSH from node1 (cloud state running)"),
    ("kill", "running", False, "is running in the cloud although SSH from node1 gets no answer"),
    ("partition", "running", True, "still answers SSH from node1 (cloud state running)"),
    ("partition", "stopped", False, "is stopped in the cloud: a partitioned node must run on, cut off"),
])
def test_each_failure_mode_is_proven_by_its_own_evidence(mode, state, answers, missing):
    """stop and kill: the cloud says stopped and a peer gets no answer; a
    partition: a peer gets no answer while the cloud says the node runs."""
    cluster, hosts = _failure_cluster(state, answers)
    assert availability.failure_missing(cluster, hosts, "node2", mode) == missing


def test_a_partition_that_never_took_effect_fails_naming_it(monkeypatch):
    cluster, hosts = _failure_cluster("running", True)
    monkeypatch.setattr(availability.time, "sleep", lambda s: None)
    clock = iter(range(0, 1000, 10))
    monkeypatch.setattr(availability.time, "monotonic", lambda: next(clock))
    with pytest.raises(pytest.fail.Exception, match=r"node2 still answers SSH from node1 \(cloud state running\) "
                                                     r"30 s after the partition returned: the node was never cut off"):
        availability.prove_down(cluster, hosts, "node2", mode="partition")


def test_the_timeline_is_relative_to_the_failure_with_the_drivers_decisions():
    output = ("[0]<stdout>:REFARCH_STEP {}\n"
              "[0]<stderr>:[/tmp/pip-wheel-4zd4gr1f/horovod_e1a7234d5d8845f3bd66ba54a78fa220/third_party/"
              "compatible17_gloo/gloo/transport/tcp/pair.cc:589] Timed out waiting 30000ms for recv operation\n"
              "Process 1 exit with status code 255.\n"
              "INFO:root:blacklist host: node2\n")
    t = elastic.timeline([("failed", 100.0), ("failure proven", 105.2), ("first step at world size 1", 112.75),
                            ("restored", 104.0)], 100.0, output)
    assert t["events"] == [{"event": "failed", "t_s": 0.0}, {"event": "restored", "t_s": 4.0},
                           {"event": "failure proven", "t_s": 5.2}, {"event": "first step at world size 1", "t_s": 12.75}]
    assert len(t["decisions"]) == 3 and t["decisions"][1] == "Process 1 exit with status code 255."
    assert t["decisions"][0] == ("[0]<stderr>:[third_party/compatible17_gloo/gloo/transport/tcp/pair.cc:589] Timed out "
                                 "waiting 30000ms for recv operation")


def test_a_failure_mode_the_profile_does_not_list_is_skipped_with_the_reason():
    profile = load_profile("local", {"availability.failure_modes": ["stop"]})
    cluster = SimpleNamespace(contract=SimpleNamespace(node_names=["node1", "node2"]))
    values = {"cluster": cluster, "profile": profile, "elastic_runs": lambda mode: ELASTIC}
    request = SimpleNamespace(getfixturevalue=lambda name: values[name],
                              config=SimpleNamespace(getoption=lambda name: True))
    with pytest.raises(pytest.skip.Exception, match=r"failure mode partition not in availability.failure_modes"):
        properties.by_id()["availability.partition_recovery_s"][1].measure(request)


def test_the_job_pattern_finds_the_job_but_not_the_shell_that_kills_it():
    import re

    until = "/shared/.horovod/refarch-elastic-done-hvd-x-1"
    pattern = elastic._job_pattern(until)
    assert re.search(pattern, f"python3 horovodrun ... elastic_train.py --until-file {until} --commit-every 10")
    assert not re.search(pattern, f"bash -lc pkill -KILL -u hvd -f -- '{pattern}'")
    # The driver's SSH session to a lost host, looked for when the job does not go on.
    session = elastic._not_self("StrictHostKeyChecking=no node2 ")
    assert re.search(session, "ssh -o PasswordAuthentication=no -o StrictHostKeyChecking=no node2  cd /tmp ;")
    assert not re.search(session, f"bash -lc pgrep -u hvd -af '{session}'")
