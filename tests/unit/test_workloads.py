"""The horovodrun line of the suite's training jobs (refarch.pytest.workloads)."""

from types import SimpleNamespace

from refarch.profile import load_profile
from refarch.pytest import workloads


def _launched(monkeypatch, profile) -> str:
    seen = []

    def run_as(host, user, cmd, timeout_s):
        seen.append(cmd)
        return SimpleNamespace(rc=0, stdout='REFARCH_RESULT {"world_size": 2}', stderr="")

    monkeypatch.setattr(workloads, "run_as", run_as)
    result = workloads.horovodrun({"node1": object()}, "node1", profile, "allreduce_bench.py --sizes 1",
                                  "node1:1,node2:1", 2)
    assert result == {"world_size": 2}
    return seen[0]


def test_horovodrun_hands_the_profiles_gloo_timeout_to_every_rank(monkeypatch):
    cmd = _launched(monkeypatch, load_profile("openstack-aio-guests"))
    assert cmd.startswith("cd /tmp && horovodrun --gloo -np 2 -H node1:1,node2:1")
    assert " --start-timeout 900 --gloo-timeout-seconds 1500 " in cmd


def test_horovodrun_keeps_horovods_default_gloo_timeout_when_the_profile_sets_none(monkeypatch):
    cmd = _launched(monkeypatch, load_profile("local"))
    assert "--gloo-timeout-seconds" not in cmd and cmd.startswith("cd /tmp && horovodrun --gloo")
