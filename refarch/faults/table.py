"""The table of the fault cases, generated from the catalogue
(:data:`refarch.faults.catalogue.FAULTS`) and from the field reports whose
proof is not a fault case on a deployed cluster (:data:`ELSEWHERE`: a policy
scan fixture, the teardown suite, a QEMU virtual machine).  The docs page
``reference/faults.md`` carries it (``python -m refarch.docs --write``); a
unit test fails while the page differs.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from .catalogue import FAULTS


@dataclass(frozen=True)
class FieldReport:
    """A field report proven outside the fault cases: its ``id``, the kind
    of report it stands for, the test that proves it and the message (regex,
    or finding) that test asserts."""

    id: str
    report_kind: str
    proven_by: str
    message: str


#: The field reports proven outside the fault cases, in id order.
ELSEWHERE: tuple[FieldReport, ...] = (
    FieldReport("F15", "a security group open to the internet in several rules (0.0.0.0/1 plus 128.0.0.0/1) that a "
                "string match misses", "tests/unit/test_policy_rules.py, tests/policy (fixture split-open)",
                "the union of a group's ingress prefixes covers every routable IPv4 address"),
    FieldReport("F16", "credentials reaching `terraform output` through a local or a password resource",
                "tests/unit/test_policy_rules.py, tests/policy (fixture secret-outputs)",
                "an output whose value comes from a secret and is not sensitive"),
    FieldReport("F17", "a run's resource that lost its label survives destroy (a slow leak of volumes and addresses)",
                "tests/lifecycle/test_leaks.py (tox -e teardown)",
                "the leak check and the sweep find the run's volume by name (<run id>-<word>) as well as by label"),
    FieldReport("F21", "security-group rules that together admit the whole IPv6 internet, none of them ::/0",
                "tests/unit/test_policy_rules.py, tests/policy (fixture split-open-v6)",
                "the union of a group's IPv6 prefixes covers every routable IPv6 address"),
    FieldReport("F22", "NFSv4 identity mapping in different idmapd domains: files on the share owned by nobody",
                "tests/vm/test_nfs.py (the nfs role scenario on QEMU virtual machines)",
                r"NFSv4 idmapd domains differ: node1 '\S+', node2 '\S+' \(nfsidmap -d\)"),
)


#: The fault cases of the OpenStack target, proven live on guests the
#: all-in-one boots (``ci/tox -e openstack-guests``): each breaks the cloud or
#: the module, not a node of a running cluster.
GUESTS_TEST = "tests/openstack/test_guests.py"
ON_GUESTS: tuple[FieldReport, ...] = (
    FieldReport("no-valid-host", "a server in ERROR after apply (the scheduler finds no host); destroy with it in ERROR",
                f"{GUESTS_TEST}::test_a_server_nova_cannot_place_is_named_with_its_fault_and_destroyed",
                r"^node\d: server in ERROR: No valid host was found"),
    FieldReport("ssh-to-the-world", "a security group rule opening SSH to 0.0.0.0/0",
                f"{GUESTS_TEST}::test_ssh_open_to_the_world_is_found_by_the_outside_probe",
                "the outside probe finds node1 <address> tcp/22 and node2 <address> tcp/22 open"),
    FieldReport("user-data-fails", "a guest whose user data fails (cloud-init's runcmd exits non-zero)",
                f"{GUESTS_TEST}::test_a_guest_whose_user_data_fails_is_named_from_its_console_log",
                r"^node2: cloud-init failed \(console log\): .*(scripts-user|Failed to run module)"),
    FieldReport("fip-before-router", "a floating IP associated before the subnet's router interface exists",
                f"{GUESTS_TEST}::test_a_floating_ip_made_before_the_router_interface_is_named_as_neutrons_error",
                r"ExternalGatewayForFloatingIPNotFound|is not reachable from subnet"),
)


#: The node names and training user the table's messages are shown with (the local profile's).
_SHOWN_AS = {"n0": "node1", "n1": "node2", "user": "hvd"}


def _cell(text: str) -> str:
    """``text`` as a markdown table cell (its pipes escaped)."""
    return text.replace("|", "\\|")


def fault_table() -> str:
    """The table of the fault cases, one row per case of :data:`FAULTS`
    in order, then one per field report of :data:`ELSEWHERE` and one per
    case of :data:`ON_GUESTS`: id, field report, what is injected, and the
    messages its failures must match (regexes, shown for node1, node2 and
    user hvd).
    Markdown lines without the markers, no trailing newline."""
    rows = ["| id | field report | what is injected | the message it must produce (regex) |", "|---|---|---|---|"]
    for fault in FAULTS:
        messages = [m.format(**_SHOWN_AS) for m in fault.messages]
        assert not any("`" in m for m in messages), f"{fault.id}: a message with a backtick breaks the table"
        rows.append(f"| {fault.id} | {_cell(fault.report_kind)} | {_cell(fault.title)} | "
                    + "<br>".join(f"`{_cell(m)}`" for m in messages) + " |")
    for report in (*ELSEWHERE, *ON_GUESTS):
        rows.append(f"| {report.id} | {_cell(report.report_kind)} | proven by `{report.proven_by}` | "
                    f"`{_cell(report.message)}` |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Print the table (the docs page ``reference/faults.md`` carries it: ``python -m refarch.docs --write``)."""
    argparse.ArgumentParser(prog="python -m refarch.faults.table",
                            description="The fault cases' table (docs/reference/faults.md).").parse_args(argv)
    print(fault_table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
