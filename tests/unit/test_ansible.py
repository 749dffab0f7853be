from pathlib import Path

from refarch.tools import ansible
from refarch.tools.ansible import PlaybookResult, _failures, parse_recap

DATA = Path(__file__).parent / "data"


def _result(name: str, rc: int = 0) -> PlaybookResult:
    text = (DATA / name).read_text()
    return PlaybookResult(rc, parse_recap(text), text)


def test_recap_of_a_converging_run():
    r = _result("ansible-converge.log")
    assert r.changed == {"node1": 4, "node2": 4}
    assert r.recap["node1"]["ok"] == 30 and r.failed_hosts() == []
    tasks = r.changed_tasks()
    assert "horovod : Install TensorFlow and Horovod from the shared wheelhouse" in tasks["node2"]
    assert len(tasks["node1"]) == 4


def test_recap_of_an_idempotent_run_has_no_changes():
    r = _result("ansible-idempotent.log")
    assert r.changed == {"node1": 0, "node2": 0}
    assert r.changed_tasks() == {}


def test_failed_run_names_hosts_and_reason():
    r = _result("ansible-failed.log", rc=2)
    assert r.failed_hosts() == ["node1"]
    failures = _failures(r.output)
    assert len(failures) == 1
    assert failures[0].startswith("fatal: [node1 -> localhost]: FAILED!")
    assert "ssh/cluster does not exist" in failures[0]


def test_last_recap_wins():
    text = ("PLAY RECAP ***\nnode1 : ok=1 changed=1 unreachable=0 failed=0\n\n"
            "PLAY RECAP ***\nnode1 : ok=1 changed=0 unreachable=0 failed=0\n")
    assert parse_recap(text) == {"node1": {"ok": 1, "changed": 0, "unreachable": 0, "failed": 0}}


def test_failure_message_of_a_recorded_become_failure():
    # Recorded: `ansible node2 -b --become-user hvd -m copy` with setfacl gone (fault F9).
    out = (Path(__file__).parent / "data" / "ansible-become-no-setfacl.txt").read_text()
    msg = ansible.failure_message(out)
    assert msg.startswith("Task failed: Failed to set permissions on the temporary files Ansible needs to create")
    assert "\n" not in msg


def test_failure_message_json_form():
    out = 'node1 | FAILED! => {"changed": false, "msg": "No package matching \\"x\\" is available"}'
    assert ansible.failure_message(out) == 'No package matching "x" is available'
