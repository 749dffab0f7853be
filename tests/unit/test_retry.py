"""Retries as data: recorded transient failures match their rule, anything
else fails at once; the playbook runner retries within the rule's limit."""

import subprocess
from pathlib import Path

import pytest

from refarch import retry
from refarch.errors import CommandError
from refarch.tools import ansible

DATA = Path(__file__).parent / "data" / "retry"

#: Recorded output -> the rule that must govern it (None: fail at once).
CASES = {
    "ssh-refused.txt": "ssh-refused",
    "apt-lock.txt": "apt-lock",
    "apt-lists-lock.txt": "apt-lock",
    "mirror-unreachable.txt": "mirror",
    "no-such-package.txt": None,
}


@pytest.mark.parametrize("name, rule_id", CASES.items())
def test_recorded_outputs_are_classified(name, rule_id):
    failures = ansible._failures((DATA / name).read_text())
    assert failures, f"{name}: no failure lines found"
    rule = retry.classify(failures)
    assert (rule.id if rule else None) == rule_id, failures


def test_one_permanent_failure_makes_the_attempt_permanent():
    transient = ansible._failures((DATA / "ssh-refused.txt").read_text())
    permanent = ansible._failures((DATA / "no-such-package.txt").read_text())
    assert retry.classify(transient + permanent) is None
    assert retry.classify([]) is None


def test_every_rule_has_a_reason_and_a_limit():
    ids = [r.id for r in retry.RETRYABLE]
    assert len(ids) == len(set(ids))
    for rule in retry.RETRYABLE:
        assert rule.reason and 1 < rule.attempts <= 5 and rule.wait_s > 0


def _fake_runs(monkeypatch, outputs):
    calls = []

    def fake_run(cmd, **kwargs):
        out = outputs[min(len(calls), len(outputs) - 1)]
        calls.append(cmd)
        rc = 0 if "failed=0" in out and "unreachable=0" in out else 2
        return subprocess.CompletedProcess(cmd, rc, out, "")

    monkeypatch.setattr(ansible.proc, "run", fake_run)
    monkeypatch.setattr(ansible.time, "sleep", lambda s: None)
    monkeypatch.setattr(ansible, "playbook_command", lambda: "ansible-playbook")
    return calls


OK = "PLAY RECAP ***\nnode1 : ok=3 changed=0 unreachable=0 failed=0 skipped=0 rescued=0 ignored=0\n"


def test_a_transient_failure_is_retried_then_passes(monkeypatch, tmp_path, capsys):
    calls = _fake_runs(monkeypatch, [(DATA / "ssh-refused.txt").read_text(), OK])
    result = ansible.run_playbook(tmp_path / "inv.yml", tmp_path / "ansible.log", timeout_s=600)
    assert len(calls) == 2 and result.attempts == 2 and result.rc == 0
    note = "retrying ansible-playbook (attempt 2/4) in 10 s: ssh-refused"
    assert note in capsys.readouterr().err and note in (tmp_path / "ansible.log").read_text()


def test_a_transient_failure_stops_at_its_limit(monkeypatch, tmp_path):
    calls = _fake_runs(monkeypatch, [(DATA / "mirror-unreachable.txt").read_text()])
    with pytest.raises(CommandError, match="Failed to update apt cache"):
        ansible.run_playbook(tmp_path / "inv.yml", tmp_path / "ansible.log", timeout_s=600)
    assert len(calls) == 3


def test_a_permanent_failure_is_not_retried(monkeypatch, tmp_path):
    calls = _fake_runs(monkeypatch, [(DATA / "no-such-package.txt").read_text()])
    with pytest.raises(CommandError, match="nosuchpackage"):
        ansible.run_playbook(tmp_path / "inv.yml", tmp_path / "ansible.log", timeout_s=600)
    assert len(calls) == 1
