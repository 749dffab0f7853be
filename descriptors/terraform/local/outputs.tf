# The cluster contract: the same outputs, in the same shape, as
# descriptors/terraform/openstack.  Nothing after `terraform apply` may care
# which cloud made the nodes.

output "run_id" {
  description = "Run id carried by every resource."
  value       = var.run_id
}

output "cloud" {
  description = "Which root module made the cluster."
  value       = "local"
}

output "nodes" {
  description = "Nodes: list of {name, address, roles}; name is the node's hostname, address its cluster address."
  value = [
    for n in terraform_data.node : {
      name    = n.output.hostname
      address = n.output.address
      roles   = local.nodes[index(local.nodes[*].hostname, n.output.hostname)].roles
    }
  ]
}

output "cluster_network" {
  description = "The network the nodes talk over (MPI, Gloo, NCCL, shared storage)."
  value = {
    cidr = var.subnet_cidr
    name = terraform_data.network.output.name
  }
}

output "ssh_user" {
  description = "Admin user with passwordless sudo on every node."
  value       = "debian"
}

output "ssh_private_key_file" {
  description = "Private key for ssh_user."
  value       = var.ssh_private_key_file
}

output "ssh_known_hosts_file" {
  description = "known_hosts with every node's host key (strict host key checking from the controller)."
  value       = var.ssh_known_hosts_file
}

output "ssh_bastion" {
  description = "Jump host to reach the nodes, or null when they are reachable directly."
  value       = null
}

output "shared_storage" {
  description = "Shared storage: {server, server_address, export, mount_point, type}."
  value       = local.contract_shared_storage
}

output "network_policy" {
  description = "What may reach the nodes from outside the cluster: SSH (tcp/22) from admin_cidrs and the controller; the nftables table that enforces it."
  value = {
    admin_cidrs = var.admin_cidrs
    allowed     = ["tcp/22"]
    table       = terraform_data.network_policy.output.table
  }
}

locals {
  contract_shared_storage = {
    server         = local.nodes[0].hostname
    server_address = local.nodes[0].address
    export         = var.shared_storage.export
    mount_point    = var.shared_storage.mount_point
    type           = "sshfs"
  }
}

output "ansible_inventory" {
  description = "Ansible inventory (YAML) for descriptors/ansible/site.yml, as the suite writes it from the outputs above: group cluster (every node), group storage_server, the admin connection with strict host key checking, the cluster contract the roles read. Deploying by hand: terraform output -raw ansible_inventory > inventory.yml."
  value = yamlencode({
    all = {
      vars = {
        ansible_user                 = "debian"
        ansible_ssh_private_key_file = var.ssh_private_key_file
        ansible_ssh_common_args      = "-o StrictHostKeyChecking=yes -o UserKnownHostsFile=${var.ssh_known_hosts_file}"
        ansible_python_interpreter   = "/usr/bin/python3"
        ca_certificates_files        = var.extra_ca_certificates
        cluster_ssh_key_dir          = "${abspath(path.root)}/cluster-key"
        horovod_wheelhouse_src       = var.horovod_wheelhouse
        cluster_contract = {
          run_id         = var.run_id
          cloud          = "local"
          cluster_cidr   = var.subnet_cidr
          shared_storage = local.contract_shared_storage
        }
      }
      children = {
        cluster = {
          hosts = {
            for n in terraform_data.node : n.output.hostname => {
              ansible_host = n.output.address
              node_roles   = local.nodes[index(local.nodes[*].hostname, n.output.hostname)].roles
            }
          }
        }
        storage_server = { hosts = { (local.nodes[0].hostname) = {} } }
      }
    }
  })
}
