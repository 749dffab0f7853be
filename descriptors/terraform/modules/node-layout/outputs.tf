output "nodes" {
  description = "Nodes in order: list of {hostname, address, roles}."
  value       = local.nodes
}
