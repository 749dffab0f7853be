"""Both Terraform root modules output the same cluster contract, follow the
module conventions (described, typed and validated inputs, pinned
providers), and keep secrets out of their outputs.  Parsed with python-hcl2,
since `terraform validate` of the OpenStack module needs its provider."""

import re

import hcl2
import pytest

from refarch.contract import CONTRACT_OUTPUTS, OPTIONAL_OUTPUTS
from refarch.paths import TERRAFORM_DIR

MODULES = ("local", "openstack")
#: Inputs where no value is wrong (paths the suite writes, cloud defaults).
NO_VALIDATION_NEEDED = {"ssh_private_key_file", "ssh_known_hosts_file", "volume_type", "availability_zone"}


def _one(value):
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def blocks(module: str, filename: str, kind: str) -> dict:
    with open(TERRAFORM_DIR / module / filename, encoding="utf-8") as fh:
        data = hcl2.load(fh)
    merged = {}
    for block in data.get(kind, []):
        for name, body in block.items():
            merged[name.strip('"')] = {k: _one(v) for k, v in body.items()}
    return merged


def _locals(module: str) -> dict:
    merged = {}
    for path in sorted((TERRAFORM_DIR / module).glob("*.tf")):
        with open(path, encoding="utf-8") as fh:
            for block in hcl2.load(fh).get("locals", []):
                merged.update({k: _one(v) for k, v in block.items()})
    return merged


def _resolved(value, names: dict):
    """An output's value with a whole-value `local.NAME` reference replaced
    by that local's value (python-hcl2 reads it as the string "${local.NAME}")."""
    match = re.fullmatch(r"\$\{local\.(\w+)\}", value) if isinstance(value, str) else None
    return names[match.group(1)] if match else value


@pytest.fixture(scope="module")
def outputs():
    found = {}
    for m in MODULES:
        names = _locals(m)
        found[m] = {name: {**body, "value": _resolved(body.get("value"), names)}
                    for name, body in blocks(m, "outputs.tf", "output").items()}
    return found


def test_same_output_names(outputs):
    # known_hosts: lines the OpenStack module hands back for the caller to
    # write (it has no provider that writes files); the local one writes them.
    assert set(outputs["local"]) == set(outputs["openstack"]) - {"known_hosts"}
    assert set(CONTRACT_OUTPUTS) | set(OPTIONAL_OUTPUTS) <= set(outputs["local"])


def test_every_output_is_described(outputs):
    for module, outs in outputs.items():
        for name, body in outs.items():
            assert body.get("description"), f"{module}: output {name} has no description"


def test_node_and_network_shapes_match(outputs):
    for module in MODULES:
        nodes = str(outputs[module]["nodes"]["value"])
        for key in ("name", "address", "roles"):
            assert re.search(rf"['\"]?{key}['\"]?\s*[:=]", nodes), f"{module}: nodes lack {key}"
    local_net = _one(outputs["local"]["cluster_network"]["value"])
    cloud_net = _one(outputs["openstack"]["cluster_network"]["value"])
    assert set(local_net) == set(cloud_net) == {"cidr", "name"}


def test_shared_storage_shape(outputs):
    local = set(_one(outputs["local"]["shared_storage"]["value"]))
    cloud = set(_one(outputs["openstack"]["shared_storage"]["value"]))
    required = {"server", "server_address", "export", "mount_point", "type"}
    assert required <= local and required <= cloud
    assert local <= cloud, "the OpenStack contract may add keys, never drop local ones"


@pytest.mark.parametrize("module", MODULES)
def test_inputs_are_described_typed_and_validated(module):
    variables = blocks(module, "variables.tf", "variable")
    assert variables
    for name, body in variables.items():
        assert body.get("description"), f"{module}: variable {name} has no description"
        assert body.get("type"), f"{module}: variable {name} has no type"
        if name not in NO_VALIDATION_NEEDED:
            assert body.get("validation"), f"{module}: variable {name} has no validation block"


def test_openstack_providers_are_pinned():
    text = (TERRAFORM_DIR / "openstack" / "versions.tf").read_text()
    versions = re.findall(r'\n\s+version\s*=\s*"([^"]+)"', text)  # providers, not required_version
    assert len(versions) == 1 and all(re.fullmatch(r"\d+\.\d+\.\d+", v) for v in versions), versions
    assert 'source  = "terraform-provider-openstack/openstack"' in text
