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
  value = {
    server         = local.nodes[0].hostname
    server_address = local.nodes[0].address
    export         = var.shared_storage.export
    mount_point    = var.shared_storage.mount_point
    type           = "sshfs"
  }
}

output "network_policy" {
  description = "What may reach the nodes from outside the cluster: SSH (tcp/22) from admin_cidrs and the controller; the nftables table that enforces it."
  value = {
    admin_cidrs = var.admin_cidrs
    allowed     = ["tcp/22"]
    table       = terraform_data.network_policy.output.table
  }
}
