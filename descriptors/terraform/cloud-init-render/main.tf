# Renders the OpenStack module's cloud-init user-data from the same inputs as
# descriptors/terraform/openstack (hostname, the node's SSH host key pair),
# with Terraform's own templatefile and no provider: the role scenarios boot
# virtual machines from its output (a NoCloud seed) to prove the template
# works on a real cloud-init.
terraform {
  required_version = ">= 1.4"
}

variable "template_file" {
  description = "Path of descriptors/terraform/openstack/templates/cloud-init.yaml.tftpl"
  type        = string
}

variable "nodes" {
  description = "Per node: hostname, address, OpenSSH private host key and its public key (as tls_private_key gives them)"
  type = list(object({
    hostname        = string
    address         = string
    host_key        = string
    host_public_key = string
  }))
  sensitive = true
}

output "user_data" {
  description = "Hostname -> rendered cloud-init user-data"
  sensitive   = true
  value = { for node in var.nodes : node.hostname => templatefile(var.template_file, {
    hostname        = node.hostname
    host_key        = node.host_key
    host_public_key = node.host_public_key
  }) }
}

output "known_hosts" {
  description = "known_hosts lines for the nodes, as the OpenStack module writes them"
  value       = join("", [for node in nonsensitive(var.nodes) : "${node.address} ${trimspace(node.host_public_key)}\n"])
}
