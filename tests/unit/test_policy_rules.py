"""Policies checkov's per-rule checks miss: a security group's ingress
ranges judged by what they cover together (F15), and secrets
followed to the outputs that carry them (F16)."""

from pathlib import Path

from refarch.paths import TERRAFORM_DIR
from refarch.tools import tfrules as policy

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


def test_the_ipv6_internet_in_two_halves_is_the_ipv6_internet():
    found = policy.findings(FIXTURES / "split-open-v6")
    assert len(found) == 2, found
    assert found[0].startswith("security group ${openstack_networking_secgroup_v2.cluster.id}: non-SSH ports admit "
                               "::/0 = the whole IPv6 internet from ::/1 "
                               "(openstack_networking_secgroup_rule_v2.low_half_v6, tcp 1-65535), 8000::/1"), found[0]


def _rules(tmp_path, *prefixes, ethertype="IPv4"):
    body = "".join(f'''
resource "openstack_networking_secgroup_rule_v2" "r{i}" {{
  security_group_id = "sg"
  direction         = "ingress"
  ethertype         = "{ethertype}"
  protocol          = "tcp"
  port_range_min    = 8000
  port_range_max    = 8000
  {f'remote_ip_prefix  = "{p}"' if p else ""}
}}
''' for i, p in enumerate(prefixes))
    (tmp_path / "main.tf").write_text(body)
    return policy.findings(tmp_path)


def test_what_covers_every_routable_address_is_the_whole_internet(tmp_path):
    """Not only 0.0.0.0/0 and ::/0: prefixes that leave out only multicast
    and the reserved block (224.0.0.0/3), or only IPv6 outside global
    unicast, admit the whole internet all the same; a rule with no prefix
    admits its ethertype's whole space."""
    four = _rules(tmp_path, "0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/3")
    assert len(four) == 1 and "admit 0.0.0.0/1, 128.0.0.0/2, 192.0.0.0/3 = the whole IPv4 internet" in four[0], four
    six = _rules(tmp_path, "2000::/4", "3000::/4", ethertype="IPv6")
    assert len(six) == 1 and "admit 2000::/3 = the whole IPv6 internet" in six[0], six
    anyv6 = _rules(tmp_path, "", ethertype="IPv6")
    assert "admit ::/0 = the whole IPv6 internet from any" in anyv6[0], anyv6
    # Too wide, but not the internet: named without "whole".
    part = _rules(tmp_path, "2001:db8::/32", "8.0.0.0/8")
    assert len(part) == 2 and not any("whole" in line for line in part), part
    assert "admit 8.0.0.0/8 from 8.0.0.0/8" in part[0] and "admit 2001:db8::/32 from 2001:db8::/32" in part[1], part
    assert policy.uncovered(policy.ROUTABLE[4], [policy.WORLD]) == []
    assert policy.uncovered(policy.ROUTABLE[6], [policy.WORLD]) == policy.ROUTABLE[6]  # another family


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
