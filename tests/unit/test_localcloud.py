import ipaddress

import pytest

from refarch.clouds import local as localcloud
from refarch.errors import PreflightError, RefarchError


def nets(*cidrs):
    return [ipaddress.ip_network(c) for c in cidrs]


def test_pick_subnet_skips_used_networks_and_routes():
    used = nets("10.213.0.0/24", "10.213.1.128/25", "10.88.0.0/16")
    assert localcloud.pick_subnet("10.213.0.0/16", 24, used) == "10.213.2.0/24"


def test_pick_subnet_skips_a_covering_route():
    assert localcloud.pick_subnet("10.213.0.0/23", 24, nets("10.213.0.0/24")) == "10.213.1.0/24"
    with pytest.raises(RefarchError, match="no free /24 left in subnet pool 10.213.0.0/23"):
        localcloud.pick_subnet("10.213.0.0/23", 24, nets("10.0.0.0/8"))


def test_preflight_names_every_missing_tool():
    present = {"podman", "ssh", "ssh-keygen", "flock"}
    with pytest.raises(PreflightError) as info:
        localcloud.preflight_tools(which=lambda tool: tool in present and f"/usr/bin/{tool}")
    text = str(info.value)
    assert "runc (apt-get install runc)" in text and "debootstrap (apt-get install debootstrap)" in text
    assert "terraform" in text and "podman (" not in text
    # The local stage's own tools are named (the exposure survey enters each
    # node's namespace with nsenter and lists its sockets with ss), those of
    # other stages are not (QEMU is the VM stage's).
    assert "nsenter (apt-get install util-linux)" in text and "ss (apt-get install iproute2)" in text
    assert "qemu" not in text and "chromium" not in text
