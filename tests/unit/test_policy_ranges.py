"""FAULTS.md F15: the security-group policy judges what address ranges
cover, not how they are spelled."""

from pathlib import Path

from refarch import policy
from refarch.paths import TERRAFORM_DIR

FIXTURES = Path(__file__).resolve().parents[1] / "policy" / "fixtures"


def test_the_openstack_descriptors_pass():
    assert policy.findings(TERRAFORM_DIR / "openstack") == []


def test_the_internet_in_two_halves_is_the_internet():
    found = policy.findings(FIXTURES / "split-open")
    assert len(found) == 2, found  # non-SSH ports, and SSH (22 lies in 1-65535)
    assert "non-SSH ports admit 0.0.0.0/0 = the whole IPv4 internet from 0.0.0.0/1" in found[0]
    assert "128.0.0.0/1 (openstack_networking_secgroup_rule_v2.high_half, tcp 1-65535)" in found[0]


def test_the_insecure_fixture_is_caught_too():
    found = policy.findings(FIXTURES / "insecure")
    assert any("the whole IPv4 internet" in line for line in found), found


def test_a_range_inside_the_cluster_network_passes(tmp_path):
    (tmp_path / "main.tf").write_text(
        (FIXTURES / "split-open" / "main.tf").read_text()
        .replace('"0.0.0.0/1"', '"10.42.0.0/25"').replace('"128.0.0.0/1"', '"10.42.0.128/25"'))
    assert policy.findings(tmp_path) == []
