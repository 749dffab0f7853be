from pathlib import Path

import pytest

from refarch.judge import checks

DATA = Path(__file__).parent / "data"


def test_sshd_t_recorded_output_passes_local_expectations():
    from refarch.profile import load_profile

    effective = checks.parse_sshd_t((DATA / "sshd-T-hardened.txt").read_text())
    assert checks.sshd_violations(effective, load_profile("local").expect.sshd) == []


def test_sshd_violation_names_setting_and_values():
    effective = checks.parse_sshd_t("passwordauthentication yes\npermitrootlogin yes\n")
    problems = checks.sshd_violations(effective, {"passwordauthentication": "no",
                                                  "permitrootlogin": ["no", "prohibit-password"],
                                                  "permitemptypasswords": "no"})
    assert problems == [
        "passwordauthentication is 'yes', expected 'no'",
        "permitemptypasswords is not set, expected 'no'",
        "permitrootlogin is 'yes', expected 'no' or 'prohibit-password'",
    ]


def test_check_build_recorded_output():
    built = checks.parse_check_build((DATA / "check-build-cpu.txt").read_text())
    # Recorded from the local wheelhouse build (HOROVOD_WITHOUT_PYTORCH=1;
    # check-build still marks PyTorch, which is Horovod's own quirk).
    assert "TensorFlow" in built["frameworks"] and "MXNet" not in built["frameworks"]
    assert set(built["controllers"]) == {"MPI", "Gloo"}
    assert built["version"] == ["0.28.1"]
    assert checks.missing_build_features(built, ["TensorFlow"], ["Gloo", "MPI"]) == []
    assert checks.missing_build_features(built, ["MXNet"], ["Gloo"]) == ["framework MXNet"]


def test_check_build_without_mpi_is_caught():
    text = "Horovod v0.28.1:\n\nAvailable Controllers:\n    [ ] MPI\n    [X] Gloo\n"
    built = checks.parse_check_build(text)
    assert checks.missing_build_features(built, [], ["MPI"]) == ["controller MPI"]


def test_duplicates_and_consistency():
    assert checks.duplicated({"node1": "a", "node2": "a", "node3": "b"}) == {"a": ["node1", "node2"]}
    assert checks.duplicated({"node1": "a", "node2": "b"}) == {}
    assert checks.inconsistent({"node1": "2.15.1", "node2": "2.16.0"})
    assert not checks.inconsistent({"node1": "2.15.1", "node2": "2.15.1"})


def test_training_result_line():
    out = "[1]<stdout>:noise\n[0]<stdout>:REFARCH_RESULT {\"world_size\": 2, \"images_per_sec\": 40.5}\n"
    assert checks.parse_training_result(out) == {"world_size": 2, "images_per_sec": 40.5}
    with pytest.raises(ValueError, match="no REFARCH_RESULT"):
        checks.parse_training_result("Timed out waiting for tasks to start")


def _recorded(name: str) -> tuple[str, str]:
    """(chronyc -n tracking, ss -Hlntu) recorded on a local-cloud node."""
    text = (DATA / name).read_text()
    split = text.index("udp ") if "udp " in text else text.index("tcp ")
    return text[:split], text[split:]


def test_chrony_tracking_recorded_on_a_synchronised_node():
    tracking, _ = _recorded("node2-chrony-ss.txt")
    parsed = checks.parse_chrony_tracking(tracking)
    assert parsed["Leap status"] == "Normal"
    assert checks.chrony_problems(parsed, 50) == []
    assert checks.chrony_problems(parsed, 0.001) == ["clock is 0.0 ms slow, bound 0.001 ms"]


def test_chrony_problems_unsynchronised_or_silent():
    assert checks.chrony_problems({}, 50) == ["chronyc tracking printed nothing (is chronyd running?)"]
    text = "Leap status     : Not synchronised\nSystem time     : 0.250000000 seconds fast of NTP time\n"
    assert checks.chrony_problems(checks.parse_chrony_tracking(text), 100) == [
        "leap status is 'Not synchronised' (not synchronised)", "clock is 250.0 ms fast, bound 100 ms"]


#: ``chronyc -n tracking`` recorded on a QEMU VM (the nfs scenario's node2)
#: whose clock was set 30 s ahead while chronyd followed node1: still
#: synchronised (Normal), slewing the offset back.
CLOCK_SET_OFF = """Reference ID    : 0AD7000B (10.215.0.11)
Stratum         : 11
System time     : 29.896192551 seconds fast of NTP time
Last offset     : +0.000256117 seconds
RMS offset      : 8.997882843 seconds
Update interval : 1.0 seconds
Leap status     : Normal
"""


def test_chrony_problems_name_a_clock_set_off_in_ms_against_the_bound():
    parsed = checks.parse_chrony_tracking(CLOCK_SET_OFF)
    assert checks.chrony_problems(parsed, 10.0) == ["clock is 29896.2 ms fast, bound 10.0 ms"]
    assert checks.chrony_problems(parsed, 30000) == []


def test_listening_sockets_recorded():
    _, ss = _recorded("node1-chrony-ss.txt")
    assert checks.listening_sockets(ss) == {"tcp/22", "udp/123"}
    _, ss2 = _recorded("node2-chrony-ss.txt")
    assert checks.listening_sockets(ss2) == {"tcp/22"}
    extra = "tcp LISTEN 0 5 0.0.0.0:8099 0.0.0.0:*\ntcp LISTEN 0 5 [fe80::1%eth0]:7000 [::]:*\n"
    assert checks.listening_sockets(extra) == {"tcp/8099", "tcp/7000"}


def test_missing_nodes_names_the_nodes_that_never_came_up():
    assert checks.missing_nodes(3, ["node1", "node2"]) == ["node3"]
    assert checks.missing_nodes(2, ["node2"]) == ["node1"]
    assert checks.missing_nodes(2, ["node1", "node2"]) == []


def test_every_expected_framework_has_a_horovod_extension_to_import():
    assert checks.HOROVOD_EXTENSIONS["PyTorch"] == "horovod.torch.mpi_lib_v2"
    assert checks.HOROVOD_EXTENSIONS["TensorFlow"] == "horovod.tensorflow.mpi_ops"


def test_root_cause_prefers_the_cause_over_its_consequences():
    out = ("bash: line 1: orted: command not found\n"
           "--------------------------------------------------------------------------\n"
           "ORTE was unable to reliably start one or more daemons.\n"
           "This usually is caused by: ... Connection refused ...\n")
    assert checks.root_cause(out) == "bash: line 1: orted: command not found"
    gloo = "RuntimeError: Gloo: Unable to find address for: eth0\nHorovod detected that one or more processes exited"
    assert checks.root_cause(gloo).endswith("Unable to find address for: eth0")
    assert checks.root_cause("all fine\n") == ""


def test_the_cause_is_what_a_rank_printed_not_the_launchers_traceback():
    """Recorded: digits_convergence.py at np=3 with a global batch of 32."""
    text = (DATA / "properties" / "convergence-np3-uneven-batch.log").read_text(encoding="utf-8")
    assert checks.cause_line(text).endswith("--global-batch-size 32 does not split over 3 ranks")
    noise = "[0]<stderr>:To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow"
    assert checks.cause_line(noise + "\nProcess 0 exit with status code 1.\n") == ""


def test_a_gloo_bind_failure_names_the_hostname_that_resolves_elsewhere():
    # As a rank printed it on the second node when both nodes were named node1 (fault case F1).
    out = ("[1]<stderr>:  what():  [enforce fail at /tmp/pip-wheel-x/horovod_y/third_party/compatible17_gloo/gloo/"
           "transport/tcp/device.cc:126] bind_rv == 0. Unable to find address for node1; bind(2) for [10.213.0.10] "
           "failed with: Cannot assign requested address\n")
    assert checks.gloo_bind_hint(out) == ("a rank's node calls itself node1 and node1 resolves to 10.213.0.10, an "
                                          "address that node lacks (two nodes with one hostname, or a stale name)")
    assert checks.gloo_bind_hint("Gloo connectFullMesh failed") == ""


def test_a_gloo_rendezvous_timeout_names_the_waiting_rank_its_node_and_the_knob():
    # np=2 on two QEMU (TCG) guests of the all-in-one, as recorded: node2's
    # rank reached hvd.init more than 30 s before node1's and gave up.
    out = (Path(__file__).parent / "data" / "causes" / "gloo-rendezvous-timeout-np2.txt").read_text()
    assert "Wait timeout after 30 seconds for key(s): 0" in checks.cause_line(out)
    assert checks.gloo_timeout_hint(out, ["node1", "node2"]) == (
        "rank 1 on node2 waited 30 s in Gloo's rendezvous for rank(s) 0 "
        "(horovodrun's --gloo-timeout-seconds: the profile's smoke.gloo_timeout_s raises it)")
    assert checks.gloo_timeout_hint("[0]<stderr>:Terminated") == ""


def test_an_orted_error_names_its_node_and_cause():
    # mpirun's output with node2's /tmp full (F25) and node2's open-file limit at 20 (F23), as recorded.
    data = Path(__file__).parent / "data" / "mpirun"
    assert checks.orted_error((data / "tmp-full.txt").read_text()) == (
        "node2: orted could not create /tmp/ompi.node2.2001: No space left on device")
    assert checks.orted_error((data / "nofile-20.txt").read_text()) == (
        "node2: orted: The system limit on number of pipes a process can open was reached")
    assert checks.orted_error("ORTE was unable to reliably start one or more daemons.") == ""
