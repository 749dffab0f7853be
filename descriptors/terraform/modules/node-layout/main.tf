# The cluster's node layout, shared by every cloud's root module so that
# they name and address nodes alike: node<i> at cidrhost(subnet, first + i),
# the first node also serving the shared storage.
locals {
  nodes = [
    for i in range(var.node_count) : {
      hostname = "node${i + 1}"
      address  = cidrhost(var.subnet_cidr, var.first_host_number + i)
      roles    = i == 0 ? ["worker", "storage"] : ["worker"]
    }
  ]
}
