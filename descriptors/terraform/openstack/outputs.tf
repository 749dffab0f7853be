# The cluster contract: the same outputs, in the same shape, as
# descriptors/terraform/local (tests/unit/test_contract_modules.py checks it),
# plus ssh_bastion, which the local cloud leaves null.

output "run_id" {
  description = "Run id carried by every resource."
  value       = var.run_id
}

output "cloud" {
  description = "Which root module made the cluster."
  value       = "openstack"
}

output "nodes" {
  description = "Nodes: list of {name, address, roles}; name is the node's hostname, address its cluster address."
  value = [
    for i, n in local.nodes : {
      name    = n.hostname
      address = openstack_networking_port_v2.node[i].all_fixed_ips[0]
      roles   = n.roles
    }
  ]
}

output "cluster_network" {
  description = "The network the nodes talk over (MPI, Gloo, NCCL, shared storage)."
  value = {
    cidr = openstack_networking_subnet_v2.cluster.cidr
    name = openstack_networking_network_v2.cluster.name
  }
}

output "ssh_user" {
  description = "Admin user with passwordless sudo on every node."
  value       = var.ssh_user
}

output "ssh_private_key_file" {
  description = "Private key for ssh_user."
  value       = var.ssh_private_key_file
}

output "ssh_known_hosts_file" {
  description = "Where the controller keeps known_hosts: the caller writes the known_hosts output there (terraform output -raw known_hosts > FILE)."
  value       = var.ssh_known_hosts_file
}

output "known_hosts" {
  description = "known_hosts lines for every node's fixed IP and the bastion's floating IP, from the host keys in ssh_host_keys_dir."
  value = join("", concat(
    [for i, n in local.nodes : "${n.address} ${local.host_keys[i].public}\n"],
    ["${openstack_networking_floatingip_v2.bastion.address} ${local.host_keys[0].public}\n"],
  ))
}

output "ssh_bastion" {
  description = "Jump host to reach the nodes: the first node's floating IP."
  value = {
    address = openstack_networking_floatingip_v2.bastion.address
    user    = var.ssh_user
  }
}

output "shared_storage" {
  description = "Shared storage: {server, server_address, export, mount_point, type}, plus the volume's device."
  value       = local.contract_shared_storage
}

output "network_policy" {
  description = "What may reach the nodes from outside the cluster: SSH (tcp/22) from admin_cidrs; the security group that enforces it."
  value = {
    admin_cidrs    = [var.admin_cidr]
    allowed        = ["tcp/22"]
    security_group = openstack_networking_secgroup_v2.cluster.name
  }
}

locals {
  contract_shared_storage = {
    server         = local.nodes[0].hostname
    server_address = local.nodes[0].address
    export         = var.shared_storage.export
    mount_point    = var.shared_storage.mount_point
    type           = "nfs"
    # virtio disks appear under the first 20 characters of the volume id;
    # without a volume the share is a folder on the first node's disk.
    device = (length(openstack_blockstorage_volume_v3.shared) > 0
    ? "/dev/disk/by-id/virtio-${substr(openstack_blockstorage_volume_v3.shared[0].id, 0, 20)}" : "")
  }
}

output "ansible_inventory" {
  description = "Ansible inventory (YAML) for descriptors/ansible/site.yml, as the suite writes it from the outputs above: group cluster (every node), group storage_server, the admin connection through the bastion with strict host key checking, the cluster contract the roles read. Deploying by hand: terraform output -raw ansible_inventory > inventory.yml."
  value = yamlencode({
    all = {
      vars = {
        ansible_user                 = var.ssh_user
        ansible_ssh_private_key_file = var.ssh_private_key_file
        ansible_ssh_common_args = join(" ", [
          "-o StrictHostKeyChecking=yes -o UserKnownHostsFile=${var.ssh_known_hosts_file}",
          # ProxyCommand, not ProxyJump: the jump's own connection needs the
          # same key and known_hosts (a ProxyJump uses the caller's defaults).
          "-o ProxyCommand=\"ssh -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile=${var.ssh_known_hosts_file} -o IdentitiesOnly=yes -o ConnectTimeout=10 -i ${var.ssh_private_key_file} -W %h:%p ${var.ssh_user}@${openstack_networking_floatingip_v2.bastion.address}\"",
        ])
        ansible_python_interpreter = "/usr/bin/python3"
        ca_certificates_files      = var.extra_ca_certificates
        cluster_ssh_key_dir        = "${abspath(path.root)}/cluster-key"
        gpu_expected_count         = var.gpus_per_node
        cluster_contract = {
          run_id         = var.run_id
          cloud          = "openstack"
          cluster_cidr   = openstack_networking_subnet_v2.cluster.cidr
          shared_storage = local.contract_shared_storage
        }
      }
      children = {
        cluster = {
          hosts = {
            for i, n in local.nodes : n.hostname => {
              ansible_host = openstack_networking_port_v2.node[i].all_fixed_ips[0]
              node_roles   = n.roles
            }
          }
        }
        storage_server = { hosts = { (local.nodes[0].hostname) = {} } }
      }
    }
  })
}
