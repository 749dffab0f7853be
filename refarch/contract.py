"""The cluster contract: what every Terraform root module outputs, and what
the rest of the pipeline (Ansible inventory, testinfra, the smoke job) reads.

Shape (``terraform output -json`` values)::

    run_id: str            cloud: "local" | "openstack"
    nodes: [{name: str, address: str, roles: [str]}]     # 1..8 nodes
    cluster_network: {cidr: str, name: str}
    ssh_user: str          ssh_private_key_file: str     ssh_known_hosts_file: str
    ssh_bastion: null | {address: str, user: str}
    shared_storage: {server: str, server_address: str, export: str,
                     mount_point: str, type: "sshfs" | "nfs"}
    network_policy: {admin_cidrs: [str], allowed: ["tcp/22"], ...}   # optional
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .errors import RefarchError

CONTRACT_OUTPUTS = (
    "run_id", "cloud", "nodes", "cluster_network", "ssh_user", "ssh_private_key_file",
    "ssh_known_hosts_file", "shared_storage",
)
#: Outputs that may be absent: Terraform leaves out outputs whose value is null.
OPTIONAL_OUTPUTS = ("ssh_bastion", "network_policy")


@dataclass(frozen=True)
class Node:
    name: str
    address: str
    roles: tuple[str, ...]


@dataclass(frozen=True)
class Contract:
    """Parsed, checked Terraform outputs. Build with :meth:`from_outputs`."""

    run_id: str
    cloud: str
    nodes: tuple[Node, ...]
    cluster_cidr: str
    ssh_user: str
    ssh_private_key_file: str
    ssh_known_hosts_file: str
    shared_storage: dict
    ssh_bastion: dict | None = None
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_outputs(cls, outputs: dict) -> Contract:
        """Check and parse ``{output name: value}``.

        Raises:
            RefarchError: an output is missing, a node address is not in the
                cluster network, or node names repeat.
        """
        missing = [name for name in CONTRACT_OUTPUTS if name not in outputs]
        if missing:
            raise RefarchError(f"cluster contract: missing outputs {', '.join(missing)}")
        nodes = tuple(Node(n["name"], n["address"], tuple(n.get("roles") or ())) for n in outputs["nodes"])
        if not nodes:
            raise RefarchError("cluster contract: no nodes")
        cidr = ipaddress.ip_network(outputs["cluster_network"]["cidr"])
        for node in nodes:
            if ipaddress.ip_address(node.address) not in cidr:
                raise RefarchError(f"cluster contract: node {node.name} address {node.address} is outside {cidr}")
        names = [n.name for n in nodes]
        if len(set(names)) != len(names):
            raise RefarchError(f"cluster contract: node names repeat: {names}")
        storage = dict(outputs["shared_storage"])
        for key in ("server", "export", "mount_point", "type"):
            if key not in storage:
                raise RefarchError(f"cluster contract: shared_storage lacks {key}")
        if storage["server"] not in names:
            raise RefarchError(f"cluster contract: storage server {storage['server']} is not a node")
        return cls(
            run_id=outputs["run_id"], cloud=outputs["cloud"], nodes=nodes, cluster_cidr=str(cidr),
            ssh_user=outputs["ssh_user"], ssh_private_key_file=outputs["ssh_private_key_file"],
            ssh_known_hosts_file=outputs["ssh_known_hosts_file"], shared_storage=storage,
            ssh_bastion=outputs.get("ssh_bastion"), raw=dict(outputs),
        )

    @classmethod
    def load(cls, path: Path) -> Contract:
        """Read a contract saved by :meth:`save`."""
        return cls.from_outputs(json.loads(path.read_text(encoding="utf-8")))

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.raw, indent=2, sort_keys=True), encoding="utf-8")

    @property
    def network_policy(self) -> dict:
        """What may reach the nodes from outside the cluster (``admin_cidrs``,
        ``allowed`` as "tcp/22"); empty when the module does not say."""
        return dict(self.raw.get("network_policy") or {})

    @property
    def node_names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def ssh_options(self) -> list[str]:
        """SSH options for the controller: key, strict host key checking
        against the run's known_hosts, batch mode (never a prompt)."""
        opts = [
            "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={self.ssh_known_hosts_file}",
            "-o", "IdentitiesOnly=yes", "-o", "ConnectTimeout=10",
            "-i", self.ssh_private_key_file,
        ]
        if self.ssh_bastion:
            opts += ["-o", f"ProxyCommand={self.bastion_proxy_command()}"]
        return opts

    def bastion_proxy_command(self) -> str:
        """The ProxyCommand that reaches a node through the bastion (the
        floating IP) with the run's key and strict host key checking against
        the run's known_hosts.  A ProxyJump would open the jump's connection
        with the defaults of whoever runs it (their keys and known_hosts, not
        the run's): Ansible's SSH through it was refused on the first guests
        the OpenStack module booted."""
        b = self.ssh_bastion
        return (f"ssh -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile={self.ssh_known_hosts_file} "
                f"-o IdentitiesOnly=yes -o ConnectTimeout=10 -i {self.ssh_private_key_file} -W %h:%p "
                f"{b.get('user', self.ssh_user)}@{b['address']}")

    def inventory(self, extra_vars: dict | None = None) -> dict:
        """An Ansible YAML inventory: group ``cluster`` with every node (host
        name = node name, ``ansible_host`` = its address), group
        ``storage_server`` with the shared-storage server, and the contract
        under ``cluster_contract`` for the roles."""
        hosts = {
            n.name: {"ansible_host": n.address, "node_roles": list(n.roles)} for n in self.nodes
        }
        common = {
            "ansible_user": self.ssh_user,
            "ansible_ssh_private_key_file": self.ssh_private_key_file,
            "ansible_ssh_common_args": (
                f"-o StrictHostKeyChecking=yes -o UserKnownHostsFile={self.ssh_known_hosts_file}"
                + (f' -o ProxyCommand="{self.bastion_proxy_command()}"' if self.ssh_bastion else "")
            ),
            "ansible_python_interpreter": "/usr/bin/python3",
            "cluster_contract": {
                "run_id": self.run_id,
                "cloud": self.cloud,
                "cluster_cidr": self.cluster_cidr,
                "shared_storage": self.shared_storage,
            },
        }
        common.update(extra_vars or {})
        return {
            "all": {
                "vars": common,
                "children": {
                    "cluster": {"hosts": hosts},
                    "storage_server": {"hosts": {self.shared_storage["server"]: {}}},
                },
            }
        }

    def write_inventory(self, path: Path, extra_vars: dict | None = None) -> Path:
        path.write_text(yaml.safe_dump(self.inventory(extra_vars), sort_keys=False), encoding="utf-8")
        return path

    def write_ssh_config(self, path: Path) -> Path:
        """An ssh_config with a ``Host <node name>`` block per node (used by
        testinfra's ssh backend and by people debugging a kept cluster)."""
        lines = []
        for node in self.nodes:
            lines += [
                f"Host {node.name}",
                f"  HostName {node.address}",
                f"  User {self.ssh_user}",
                f"  IdentityFile {self.ssh_private_key_file}",
                "  IdentitiesOnly yes",
                "  BatchMode yes",
                "  StrictHostKeyChecking yes",
                f"  UserKnownHostsFile {self.ssh_known_hosts_file}",
                "  ConnectTimeout 10",
                "  ControlMaster auto",
                "  ControlPath /tmp/refarch-cm-%C",
                "  ControlPersist 120",
            ]
            if self.ssh_bastion:
                lines.append(f"  ProxyCommand {self.bastion_proxy_command()}")
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path
