import copy
import json
import shlex
from pathlib import Path

import pytest
import yaml

from refarch.contract import Contract
from refarch.errors import RefarchError

# `terraform output -json` values recorded from descriptors/terraform/local
# (ssh_bastion is null there, and Terraform leaves null outputs out).
OUTPUTS = json.loads((Path(__file__).parent / "data" / "local-outputs.json").read_text())


def test_parse_recorded_outputs():
    c = Contract.from_outputs(OUTPUTS)
    assert c.node_names == ["node1", "node2"]
    assert c.node("node2").address == "10.213.0.11"
    assert c.shared_storage["server"] == "node1" and c.ssh_bastion is None


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda o: o.pop("nodes"), "missing outputs nodes"),
        (lambda o: o["nodes"][1].update(address="10.9.9.9"), "node2 address 10.9.9.9 is outside 10.213.0.0/24"),
        (lambda o: o["nodes"][1].update(name="node1"), "node names repeat"),
        (lambda o: o["shared_storage"].update(server="node7"), "storage server node7 is not a node"),
        (lambda o: o.update(nodes=[]), "no nodes"),
    ],
)
def test_contract_errors(mutate, message):
    outputs = copy.deepcopy(OUTPUTS)
    mutate(outputs)
    with pytest.raises(RefarchError, match=message):
        Contract.from_outputs(outputs)


def test_inventory_from_contract(tmp_path):
    c = Contract.from_outputs(OUTPUTS)
    inv = yaml.safe_load(c.write_inventory(tmp_path / "inv.yml", {"training_user": {"name": "hvd"}}).read_text())
    top = inv["all"]
    assert top["children"]["cluster"]["hosts"] == {
        "node1": {"ansible_host": "10.213.0.10", "node_roles": ["worker", "storage"]},
        "node2": {"ansible_host": "10.213.0.11", "node_roles": ["worker"]},
    }
    assert list(top["children"]["storage_server"]["hosts"]) == ["node1"]
    assert top["vars"]["ansible_user"] == "debian"
    assert "StrictHostKeyChecking=yes" in top["vars"]["ansible_ssh_common_args"]
    assert "UserKnownHostsFile=/tmp/tft/known_hosts" in top["vars"]["ansible_ssh_common_args"]
    assert top["vars"]["cluster_contract"]["shared_storage"]["type"] == "sshfs"
    assert top["vars"]["training_user"] == {"name": "hvd"}


def test_bastion_reaches_ssh_options_and_config(tmp_path):
    outputs = copy.deepcopy(OUTPUTS)
    outputs["ssh_bastion"] = {"address": "192.0.2.10", "user": "debian"}
    c = Contract.from_outputs(outputs)
    # The jump's own connection carries the run's key and known_hosts (a
    # ProxyJump would use the caller's defaults).
    jump = ("ssh -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile=/tmp/tft/known_hosts "
            "-o IdentitiesOnly=yes -o ConnectTimeout=10 -i /tmp/tft/key -W %h:%p debian@192.0.2.10")
    assert f"ProxyCommand={jump}" in c.ssh_options()
    text = c.write_ssh_config(tmp_path / "config").read_text()
    assert text.count(f"ProxyCommand {jump}") == 2
    inventory = c.inventory()["all"]["vars"]["ansible_ssh_common_args"]
    assert shlex.split(inventory)[-2:] == ["-o", f"ProxyCommand={jump}"]
    assert "Host node2\n  HostName 10.213.0.11" in text


def test_save_and_load_roundtrip(tmp_path):
    c = Contract.from_outputs(OUTPUTS)
    c.save(tmp_path / "contract.json")
    assert Contract.load(tmp_path / "contract.json") == c
