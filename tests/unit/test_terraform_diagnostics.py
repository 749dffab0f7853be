"""Terraform's error diagnostics as one line each (refarch.tools.terraform.diagnostics),
on stderr recorded from real runs: the all-in-one's servers in ERROR and its
floating IP before the router interface, a destroy without clouds.yaml, the
local module's variable validation and a failed local-exec."""

from pathlib import Path

import pytest
import tftest

from refarch.errors import CommandError
from refarch.tools import terraform
from refarch.tools.terraform import DIAGNOSTIC_CHARS, diagnostics

DATA = Path(__file__).parent / "data" / "terraform"


def recorded(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_each_error_is_named_with_its_resource_address():
    found = diagnostics(recorded("apply-servers-in-error.stderr"))
    assert [d.split(": ", 1)[0] for d in found] == ["openstack_compute_instance_v2.node[0]",
                                                     "openstack_compute_instance_v2.node[1]"]
    assert all("unexpected state 'ERROR', wanted target 'ACTIVE'" in d for d in found)


def test_the_clouds_answer_is_kept_whole():
    [found] = diagnostics(recorded("apply-floating-ip-before-router.stderr"))
    assert found.startswith("openstack_networking_floatingip_associate_v2.bastion: Error associating")
    assert '"type": "ExternalGatewayForFloatingIPNotFound"' in found and "is not reachable from subnet" in found


def test_an_error_without_a_resource_is_named_by_its_source_line_and_keeps_its_detail():
    assert diagnostics(recorded("plan-invalid-variables.stderr")) == [
        "variables.tf line 10: Invalid value for variable: node_count must be a whole number from 1 to 8. "
        "This was checked by the validation rule at variables.tf:14,3-13.",
        'variables.tf line 64: Error in function call: Call to function "fileexists" failed: "/dev/null" is a '
        "device node, not a regular file.",
    ]
    [provider] = diagnostics(recorded("destroy-no-clouds-yaml.stderr"))
    assert provider.endswith(": unable to load clouds.yaml: no clouds.yml file found: file does not exist")


def test_a_commands_output_that_starts_with_error_is_not_a_diagnostic_of_its_own():
    [found] = diagnostics(recorded("apply-local-exec-fails.stderr"))
    assert found.startswith("terraform_data.node[0]: local-exec provisioner error: Error running command")
    assert found.endswith("Output: starting podman run for node1 Error: crun: creating cgroup directory: "
                          "No space left on device")


def test_a_commands_output_with_a_blank_line_before_an_error_line_stays_in_its_diagnostic():
    stderr = recorded("apply-local-exec-fails.stderr").replace(
        "starting podman run for node1\n", "starting podman run for node1\n\n")
    # The next node's failure, with its location, is a diagnostic of its own.
    stderr += recorded("apply-local-exec-fails.stderr").replace("node[0]", "node[1]").replace("node1", "node2")
    first, second = diagnostics(stderr)
    assert first.startswith("terraform_data.node[0]: ") and first.endswith("No space left on device")
    assert second.startswith("terraform_data.node[1]: ") and "node2" in second


def test_a_long_detail_keeps_its_end_where_the_cause_is():
    noise = "\n".join(f"step {i}: fine" for i in range(200))
    stderr = recorded("apply-local-exec-fails.stderr").replace("starting podman run for node1", noise)
    [found] = diagnostics(stderr)
    assert len(found) <= DIAGNOSTIC_CHARS + len("terraform_data.node[0]: ")
    assert "local-exec provisioner error: ..." in found and found.endswith("No space left on device")


def test_no_diagnostic_in_plain_output():
    assert diagnostics("") == [] and diagnostics("Apply complete! Resources: 0 added.\n") == []


def test_a_failed_command_is_one_line_of_its_diagnostics(tmp_path):
    work = tmp_path / "terraform"
    work.mkdir()
    (work / "main.tf").write_text("")
    tf = terraform.Terraform(work, "local", tmp_path / "terraform.log")
    err = recorded("apply-servers-in-error.stderr")

    def failing():
        raise tftest.TerraformTestError(f"Error running command apply: 1 lots of progress {err}", err)

    with pytest.raises(CommandError) as caught:
        tf._call("apply", 60, failing)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(
        "terraform apply failed: openstack_compute_instance_v2.node[0]: Error waiting for instance")
    assert "; openstack_compute_instance_v2.node[1]: " in message and "lots of progress" not in message
