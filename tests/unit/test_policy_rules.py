"""Policies checkov's per-rule checks miss: a security group's ingress
ranges judged by what they cover together (FAULTS.md F15), and secrets
followed to the outputs that carry them (F16)."""

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


def test_secret_outputs_are_followed_through_locals_and_sensitive_is_respected():
    found = policy.secret_outputs(FIXTURES / "secret-outputs")
    assert found == [
        "output keys_through_locals carries the secret tls_private_key.host.private_key_openssh"
        " through local.bundle through local.host_keys without sensitive = true",
        "output db_password carries the secret random_password.db.result without sensitive = true",
        "output token carries the secret var.api_token without sensitive = true",
    ], found


def test_the_descriptors_output_no_secret():
    for cloud in ("local", "openstack"):
        assert policy.secret_outputs(TERRAFORM_DIR / cloud) == [], cloud
