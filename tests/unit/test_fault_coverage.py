"""The fault-coverage matrix (refarch.faults.coverage): every check and
property is failed by a live fault case, or says why not; the docs page
reference/faults.md carries the current table."""

from refarch import properties
from refarch.faults import coverage
from refarch.paths import ROOT


def test_every_check_and_property_is_proven_by_a_live_fault_or_says_why_not():
    assert coverage.gaps() == []


def test_the_matrix_covers_every_check_and_property():
    found = coverage.matrix()
    assert set(properties.KNOWN) <= set(found)
    assert {"test_node_reachable", "test_playbook_idempotent", "test_gpus_healthy", "test_scaling_table"} <= set(found)
    assert found["test_sshd_effective_settings"] == ["F6"]
    assert found["exposure.password_auth_nodes"] == ["password-exposed"]
    assert found["test_gpus_healthy"][0].startswith("unproven: needs a GPU node")


def test_a_check_without_a_proof_or_reason_is_a_gap(monkeypatch):
    monkeypatch.delitem(coverage.UNPROVEN, "test_cuda_version")
    assert coverage.gaps() == ["test_cuda_version: no live fault case fails it and no reason says why"]
    monkeypatch.setitem(coverage.UNPROVEN, "test_no_such_check", "a stale reason")
    assert "UNPROVEN[test_no_such_check]: no such check or property" in coverage.gaps()


def test_a_run_check_id_finds_its_proof():
    assert coverage.proofs("tests/integration/test_nodes.py::test_sshd_effective_settings[node2]") == ["F6"]
    assert coverage.proofs("tests/integration/test_properties.py::test_property[scaling.efficiency]")


def test_a_proof_elsewhere_names_a_test_that_exists():
    for name, proof in coverage.PROVEN_ELSEWHERE.items():
        path, function = proof.split(" ", 1)[0].split("::")
        assert f"def {function}(" in (ROOT / path).read_text(encoding="utf-8"), f"{name}: {proof}"
    assert coverage.matrix()["test_time_synchronised"][0] == "time"
