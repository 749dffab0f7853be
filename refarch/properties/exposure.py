"""Exposure: what a probe outside the cluster finds open on the nodes
(``expect.exposure`` says what may be open, from the admin range and from
anywhere else).

The job is the survey from an admin and an outside probe (fixture
``exposure_scans``, refarch.pytest.surveys, with the scanning in
refarch.clouds.exposure); what is judged here is each scan.
"""

from __future__ import annotations

import pytest

from .base import Group, Measurement, Property, Strict

#: sshd authentication methods that let a password guesser in.
PASSWORD_METHODS = ("password", "keyboard-interactive")


class Exposure(Strict):
    """What a probe outside the cluster may find open on a node ("tcp/22"):
    from the admin range, and from anywhere else."""

    admin: list[str] = ["tcp/22"]
    """Ports ("tcp/22") a probe in the admin range may find open on a node (exposure.admin_unexpected_ports)."""
    outside: list[str] = []
    """Ports a probe outside the admin range and the cluster may find open on a node (exposure.outside_open_ports)."""


def unexpected(scan, allowed: list[str], names: dict[str, str]) -> list[str]:
    """Open ports of ``scan`` (a refarch.clouds.exposure.ScanResult) beyond
    ``allowed`` ("tcp/22"), as "node2 10.213.0.11 tcp/8099" (``names``:
    address -> node name)."""
    return [f"{names.get(addr, addr)} {addr} {port}" for addr, ports in sorted(scan.open_ports.items())
            for port in ports if port not in allowed]


def password_offered(scan, names: dict[str, str]) -> list[str]:
    """Nodes whose sshd offers a password method: "node2 (password)"."""
    out = []
    for addr, methods in sorted(scan.ssh_methods.items()):
        bad = [m for m in methods if m in PASSWORD_METHODS]
        if bad:
            out.append(f"{names.get(addr, addr)} ({', '.join(bad)})")
    return out


def _names(request) -> dict[str, str]:
    return {n.address: n.name for n in request.getfixturevalue("cluster").contract.nodes}


def _reached_every_node(scan, names: dict[str, str]) -> None:
    """Fail unless the probe's packets reached every node's edge (counted
    per destination on this host): a scan that reached one node proves
    nothing about the others."""
    missed = [names[a] for a in names if scan.reached.get(a, 0) == 0]
    if missed:
        pytest.fail(f"the {scan.probe.kind} probe ({scan.probe.address}) scanned, but none of its packets "
                    f"reached {', '.join(missed)}: the scan proves nothing there")


def outside_open(request) -> Measurement:
    """exposure.outside_open_ports from the outside probe's scan."""
    scan = request.getfixturevalue("exposure_scans")["outside"]
    names = _names(request)
    _reached_every_node(scan, names)
    found = unexpected(scan, request.getfixturevalue("profile").expect.exposure.outside, names)
    detail = f" (outside probe {scan.probe.address}: " + ", ".join(found) + " open)" if found else ""
    return Measurement(len(found), scan.as_dict(), detail)


def admin_unexpected(request) -> Measurement:
    """exposure.admin_unexpected_ports from the admin probe's scan; fails
    when the admin range cannot reach sshd where it must."""
    allowed = request.getfixturevalue("profile").expect.exposure.admin
    scan = request.getfixturevalue("exposure_scans")["admin"]
    names = _names(request)
    _reached_every_node(scan, names)
    unreached = [names[a] for a in names if "tcp/22" not in scan.open_ports.get(a, [])]
    if "tcp/22" in allowed and unreached:
        pytest.fail(f"the admin probe ({scan.probe.address}, {scan.probe.cidr}) cannot reach sshd on "
                    f"{', '.join(unreached)}: the admin range must reach tcp/22 (and the scan proves nothing)")
    found = unexpected(scan, allowed, names)
    detail = f" (admin probe {scan.probe.address}: " + ", ".join(found) + " open)" if found else ""
    return Measurement(len(found), scan.as_dict(), detail)


def password_auth(request) -> Measurement:
    """exposure.password_auth_nodes from sshd's answers to the admin probe."""
    scan = request.getfixturevalue("exposure_scans")["admin"]
    names = _names(request)
    unanswered = [names[a] for a in names if a not in scan.ssh_methods]
    if unanswered:
        pytest.fail(f"sshd on {', '.join(unanswered)} named no authentication methods to the admin probe "
                    f"({scan.probe.address}): nmap ssh-auth-methods got no answer")
    found = password_offered(scan, names)
    detail = " (" + "; ".join(found) + " offered to the admin probe)" if found else ""
    return Measurement(len(found), {"ssh_methods": {names[a]: m for a, m in scan.ssh_methods.items()}}, detail)


GROUP = Group("exposure", properties=(
    Property("outside_open_ports", "ports",
             "ports open on any node to a probe outside the admin range and the cluster, beyond "
             "expect.exposure.outside (nmap: TCP 1-65535, UDP to every port a node listens on and nmap's 20 most "
             "frequent; a listening port the probe's packets reached counts as open)", outside_open),
    Property("admin_unexpected_ports", "ports",
             "ports open on any node to a probe in the admin range beyond expect.exposure.admin", admin_unexpected),
    Property("password_auth_nodes", "nodes",
             "nodes whose sshd offers password or keyboard-interactive login (nmap ssh-auth-methods)", password_auth),
))
