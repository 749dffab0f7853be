# The local cloud: podman "machines" (systemd as PID 1, sshd with per-node
# host keys) on a run-scoped podman network.  Built-in terraform_data with
# local-exec creates and destroys them; every resource carries the label
# refarch.run_id=<run id> so that a sweep finds what a failed create left.
#
# The network policy is the OpenStack security group's: SSH from the admin
# ranges (and the controller, this host), any traffic between the cluster's
# members, nothing else.  It is an nftables table of its own per run
# (inet refarch_<run id>), filtering what is forwarded to the run's subnet
# and what this host sends there; destroy deletes it.

module "layout" {
  source            = "../modules/node-layout"
  node_count        = var.node_count
  subnet_cidr       = var.subnet_cidr
  first_host_number = var.first_host_number
}

locals {
  network_name = "${var.run_id}-net"
  # One "key=value" per line for the script's --label options.
  labels = join("\n", [for k, v in var.labels : "${k}=${v}"])
  script = abspath("${path.module}/scripts/podman-node.sh")
  nodes  = module.layout.nodes
}

resource "terraform_data" "network" {
  input = {
    name   = local.network_name
    subnet = var.subnet_cidr
    run_id = var.run_id
    script = local.script
    labels = local.labels
  }

  provisioner "local-exec" {
    command = "${self.input.script} network-create"
    environment = {
      NETWORK = self.input.name
      SUBNET  = self.input.subnet
      RUN_ID  = self.input.run_id
      LABELS  = self.input.labels
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "${self.input.script} network-destroy"
    environment = {
      NETWORK = self.input.name
      RUN_ID  = self.input.run_id
    }
  }
}

resource "terraform_data" "node" {
  count = var.node_count

  input = {
    name        = "${var.run_id}-${local.nodes[count.index].hostname}"
    hostname    = local.nodes[count.index].hostname
    address     = local.nodes[count.index].address
    network     = terraform_data.network.output.name
    image       = var.image
    memory_mb   = var.flavor.memory_mb
    run_id      = var.run_id
    script      = local.script
    pubkey_file = var.ssh_public_key_file
    known_hosts = var.ssh_known_hosts_file
    labels      = local.labels
  }

  provisioner "local-exec" {
    command = "${self.input.script} node-create"
    environment = {
      NAME        = self.input.name
      HOSTNAME_   = self.input.hostname
      ADDRESS     = self.input.address
      NETWORK     = self.input.network
      IMAGE       = self.input.image
      MEMORY_MB   = self.input.memory_mb
      RUN_ID      = self.input.run_id
      PUBKEY_FILE = self.input.pubkey_file
      KNOWN_HOSTS = self.input.known_hosts
      LABELS      = self.input.labels
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "${self.input.script} node-destroy"
    environment = {
      NAME = self.input.name
    }
  }
}

resource "terraform_data" "network_policy" {
  input = {
    table   = "refarch_${replace(var.run_id, "-", "_")}"
    subnet  = var.subnet_cidr
    members = join(",", [for n in terraform_data.node : n.output.address])
    admin   = join(",", var.admin_cidrs)
    script  = local.script
  }

  provisioner "local-exec" {
    command = "${self.input.script} policy-create"
    environment = {
      TABLE   = self.input.table
      SUBNET  = self.input.subnet
      MEMBERS = self.input.members
      ADMIN   = self.input.admin
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "${self.input.script} policy-destroy"
    environment = {
      TABLE = self.input.table
    }
  }
}
