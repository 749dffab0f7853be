"""What runs after a fault case's revert (refarch.faults.base.after_revert): a
failed property stands only when the fault's state reads back exactly as
before it and the property passed on the cluster earlier in the session;
every node and cluster check then runs instead of the measurement."""

import subprocess
from types import SimpleNamespace

import pytest

from refarch.faults import availability, injections
from refarch.faults import base as faults
from refarch.faults.base import HEALTH_SELECTION, after_revert
from refarch.faults.catalogue import FAULTS

RECOVERY = "test_property[availability.recovery_s]"
REJOIN = "test_property[availability.rejoin_s]"
STATE = {"node1:/usr/local/bin/horovodrun-elastic": "755 0:0 ab12 -"}


def test_a_restored_state_lets_an_earlier_pass_stand_and_runs_every_check():
    selection, standing = after_revert([REJOIN, "test_node_count"], STATE, dict(STATE),
                                       {"availability.rejoin_s": "pass"})
    assert list(standing) == [REJOIN]
    assert standing[REJOIN].startswith("availability.rejoin_s passed (verdict pass) on this cluster earlier")
    assert selection == f"test_node_count or ({HEALTH_SELECTION})"


def test_a_state_the_revert_did_not_restore_fails_naming_what_differs():
    with pytest.raises(AssertionError, match=r"node1:/usr/local/bin/horovodrun-elastic: '755 0:0 ab12 -' before, "
                                             r"'755 0:0 cd34 -' after"):
        after_revert([REJOIN], STATE, {"node1:/usr/local/bin/horovodrun-elastic": "755 0:0 cd34 -"},
                     {"availability.rejoin_s": "pass"})


def test_a_property_that_did_not_pass_earlier_is_measured_again():
    selection, standing = after_revert([RECOVERY, REJOIN], STATE, dict(STATE), {"availability.rejoin_s": "warn"})
    assert list(standing) == [REJOIN]
    assert selection == f"{RECOVERY} or ({HEALTH_SELECTION})"
    selection, standing = after_revert([RECOVERY], STATE, dict(STATE), {})
    assert (selection, standing) == (RECOVERY, {})


def test_a_fault_without_state_runs_every_failed_test_again():
    selection, standing = after_revert([RECOVERY, "test_node_count"], None, None, {"availability.recovery_s": "pass"})
    assert (selection, standing) == (f"{RECOVERY} or test_node_count", {})


def test_the_long_fault_cases_read_their_state_and_the_short_ones_run_again():
    with_state = {f.id for f in FAULTS if f.state is not None}
    assert {"not-mounted-at-boot", "stop-ignored", "no-cooldown", "no-ssh-alive", "busy-neighbour"} <= with_state
    assert {f.id for f in FAULTS if f.long} <= with_state


def test_files_state_reads_mode_owner_and_content_of_each_node(monkeypatch):
    calls = []

    def sh(node, script, check=True):
        calls.append((node, script))
        return subprocess.CompletedProcess([], 0, "644 0:0\ne3b0  -\n" if node == "node1" else "absent\n", "")

    ctx = SimpleNamespace(contract=SimpleNamespace(node_names=["node1", "node2"]), sh=sh,
                          node=lambda i: ["node1", "node2"][i])
    assert faults.files_state("/etc/fstab")(ctx) == {"node1:/etc/fstab": "644 0:0 e3b0 -",
                                                    "node2:/etc/fstab": "absent"}
    assert [n for n, _ in calls] == ["node1", "node2"]
    calls.clear()
    assert list(faults.files_state("/etc/fstab", node=1)(ctx)) == ["node2:/etc/fstab"]


def test_a_fault_case_that_judges_a_property_runs_alone():
    """A fault case proven by a property (a figure, a scan, a recovery
    time) runs only where nothing else loads the machine; the others may
    run in a lane (ci/test.sh's faults:checks).  Recovery times too: beside
    the lanes availability.kill_recovery_s measured 45.1 s against 30.2
    alone (upper bound 40)."""
    for fault in FAULTS:
        judged_by_property = ("test_property" in fault.checks or fault.must_warn
                              or any("test_property" in name for name in fault.must_fail + fault.must_pass))
        assert fault.alone or not judged_by_property, f"{fault.id} judges a property but may run beside other work"
    beside = {f.id for f in FAULTS if not f.alone}
    assert {"F1", "F6", "F14", "ca-untrusted"} <= beside and len(beside) >= 20


def _recording_context(fail_on: str | None = None):
    """A FaultContext over three nodes whose sh records (node, script) and
    fails on ``fail_on``."""
    calls = []

    class Recording(faults.FaultContext):
        def sh(self, node, script, check=True):
            calls.append((node, script))
            if node == fail_on:
                raise subprocess.CalledProcessError(1, ["podman", "exec", node])
            return subprocess.CompletedProcess([], 0, "", "")

    return Recording("r1", SimpleNamespace(node_names=["node1", "node2", "node3"])), calls


def test_sh_every_node_runs_in_the_contracts_order_and_stops_at_the_first_failure():
    ctx, calls = _recording_context()
    ctx.sh_every_node("true")
    assert calls == [("node1", "true"), ("node2", "true"), ("node3", "true")]
    ctx, calls = _recording_context(fail_on="node2")
    with pytest.raises(subprocess.CalledProcessError):
        ctx.sh_every_node("true")
    assert [n for n, _ in calls] == ["node1", "node2"]


@pytest.mark.parametrize("inject, revert, path", [
    (injections.no_gradient_averaging, injections.gradient_averaging_back, "$f"),
    (availability.no_cooldown, availability.launcher_back, availability.LAUNCHER),
    (availability.gloo_timeout(60), availability.launcher_back, availability.LAUNCHER),
    (availability.no_ssh_alive, availability.ssh_alive_back, availability.SSH_ELASTIC),
    (availability.no_commit, availability.elastic_train_back, availability.ELASTIC_TRAIN),
])
def test_an_every_node_fault_backs_up_on_each_node_what_its_revert_restores(inject, revert, path):
    (ctx, injected), (back, reverted) = _recording_context(), _recording_context()
    inject(ctx)
    revert(back)
    for calls, snippet in ((injected, faults.backup(path)), (reverted, faults.restore(path))):
        assert [n for n, _ in calls] == ["node1", "node2", "node3"]
        assert len({script for _, script in calls}) == 1 and snippet in calls[0][1], calls
