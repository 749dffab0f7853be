"""The local root module: validation blocks and plan, offline with tftest
(terraform_data needs no provider).  No provisioner runs in a plan."""

import shutil

import pytest
import tftest

from refarch.paths import TERRAFORM_DIR
from refarch.pytest.tools import needs_tool

pytestmark = needs_tool("terraform", "terraform (ci/bootstrap.sh installs it)")


@pytest.fixture(scope="module")
def tf(tmp_path_factory):
    work = tmp_path_factory.mktemp("tf") / "local"
    shutil.copytree(TERRAFORM_DIR / "local", work)
    shutil.copytree(TERRAFORM_DIR / "modules", work.parent / "modules")
    key = work / "key.pub"
    key.write_text("ssh-ed25519 AAAA test\n")
    t = tftest.TerraformTest(str(work))
    t.env.pop("TF_CLI_CONFIG_FILE", None)
    t.setup(cleanup_on_exit=False)
    t.base_vars = {
        "run_id": "hvd-unit-abcdef", "subnet_cidr": "10.213.9.0/24", "image": "localhost/refarch-node:x",
        "ssh_public_key_file": str(key), "ssh_private_key_file": str(work / "key"),
        "ssh_known_hosts_file": str(work / "known_hosts"),
    }
    return t


def test_plan_has_network_nodes_and_policy(tf):
    plan = tf.plan(output=True, tf_vars={**tf.base_vars, "node_count": 3, "admin_cidrs": ["10.213.10.0/25"]})
    addresses = sorted(plan.resource_changes)
    assert addresses == ["terraform_data.network", "terraform_data.network_policy", "terraform_data.node[0]",
                         "terraform_data.node[1]", "terraform_data.node[2]"]
    node = plan.resource_changes["terraform_data.node[2]"]["change"]["after"]["input"]
    assert node["address"] == "10.213.9.12" and node["name"] == "hvd-unit-abcdef-node3"
    policy = plan.resource_changes["terraform_data.network_policy"]["change"]["after"]["input"]
    assert policy["table"] == "refarch_hvd_unit_abcdef" and policy["subnet"] == "10.213.9.0/24"
    assert policy["admin"] == "10.213.10.0/25"


@pytest.mark.parametrize(
    "override, message",
    [
        ({"node_count": 0}, "node_count must be a whole number from 1 to 8"),
        ({"subnet_cidr": "10.213.9.0/33"}, "subnet_cidr must be an IPv4 CIDR"),
        ({"run_id": "Bad_Id"}, "run_id must be 4-48 characters"),
        ({"flavor": {"memory_mb": 100}}, "flavor.memory_mb must be at least 512"),
        ({"admin_cidrs": ["0.0.0.0/0"]}, "admin_cidrs must be IPv4 CIDRs, none of them the whole internet"),
    ],
)
def test_variable_validation(tf, override, message):
    with pytest.raises(tftest.TerraformTestError) as info:
        tf.plan(tf_vars={**tf.base_vars, **override})
    assert message in " ".join(str(info.value).split())
