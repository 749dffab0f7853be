# The reference architecture on an OpenStack cloud: a private cluster network
# behind a router, a security group that admits SSH only from admin_cidr and
# everything between the cluster's own members (MPI, NCCL and Gloo use
# ephemeral ports), N GPU nodes, a volume on the first node exported over
# NFS, and one floating IP on the first node as the SSH bastion.  Every name
# and tag carries the run id, so the janitor and the leak check find them.

module "layout" {
  source            = "../modules/node-layout"
  node_count        = var.node_count
  subnet_cidr       = var.subnet_cidr
  first_host_number = var.first_host_number
}

locals {
  tags  = ["refarch", "refarch-run:${var.run_id}"]
  nodes = module.layout.nodes
}

data "openstack_networking_network_v2" "external" {
  name     = var.external_network_name
  external = true
}

resource "openstack_networking_network_v2" "cluster" {
  name           = "${var.run_id}-net"
  admin_state_up = true
  tags           = local.tags
}

resource "openstack_networking_subnet_v2" "cluster" {
  name            = "${var.run_id}-subnet"
  network_id      = openstack_networking_network_v2.cluster.id
  cidr            = var.subnet_cidr
  ip_version      = 4
  dns_nameservers = var.dns_nameservers
  tags            = local.tags
}

resource "openstack_networking_router_v2" "cluster" {
  name                = "${var.run_id}-router"
  external_network_id = data.openstack_networking_network_v2.external.id
  tags                = local.tags
}

resource "openstack_networking_router_interface_v2" "cluster" {
  router_id = openstack_networking_router_v2.cluster.id
  subnet_id = openstack_networking_subnet_v2.cluster.id
}

resource "openstack_networking_secgroup_v2" "cluster" {
  name        = "${var.run_id}-cluster"
  description = "Horovod cluster ${var.run_id}: SSH from admin_cidr, all traffic between members"
  tags        = local.tags
}

resource "openstack_networking_secgroup_rule_v2" "ssh_admin" {
  security_group_id = openstack_networking_secgroup_v2.cluster.id
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = "tcp"
  port_range_min    = 22
  port_range_max    = 22
  remote_ip_prefix  = var.admin_cidr
  description       = "SSH from the admin range only"
}

resource "openstack_networking_secgroup_rule_v2" "members" {
  for_each          = toset(["tcp", "udp", "icmp"])
  security_group_id = openstack_networking_secgroup_v2.cluster.id
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = each.key
  remote_group_id   = openstack_networking_secgroup_v2.cluster.id
  description       = "All ${each.key} between cluster members (MPI, NCCL, Gloo, NFS)"
}

resource "openstack_compute_keypair_v2" "admin" {
  name       = "${var.run_id}-admin"
  public_key = trimspace(file(var.ssh_public_key_file))
}

# Host keys are made beforehand (ssh-keygen, one pair per node in
# ssh_host_keys_dir) and injected by cloud-init, so the controller's
# known_hosts (the known_hosts output) is right from the first connection:
# strict checking, no trust on first use.
locals {
  host_keys = [for n in local.nodes : {
    private = sensitive(file("${var.ssh_host_keys_dir}/${n.hostname}"))
    public  = trimspace(file("${var.ssh_host_keys_dir}/${n.hostname}.pub"))
  }]
}

resource "openstack_networking_port_v2" "node" {
  count              = var.node_count
  name               = "${var.run_id}-${local.nodes[count.index].hostname}"
  network_id         = openstack_networking_network_v2.cluster.id
  security_group_ids = [openstack_networking_secgroup_v2.cluster.id]
  tags               = local.tags

  fixed_ip {
    subnet_id  = openstack_networking_subnet_v2.cluster.id
    ip_address = local.nodes[count.index].address
  }
}

resource "openstack_compute_instance_v2" "node" {
  count             = var.node_count
  name              = "${var.run_id}-${local.nodes[count.index].hostname}"
  image_name        = var.image_name
  flavor_name       = var.flavor_name
  key_pair          = openstack_compute_keypair_v2.admin.name
  availability_zone = var.availability_zone
  tags              = local.tags
  metadata = {
    refarch_run_id = var.run_id
    refarch_node   = local.nodes[count.index].hostname
  }
  user_data = templatefile("${path.module}/templates/cloud-init.yaml.tftpl", {
    hostname        = local.nodes[count.index].hostname
    host_key        = local.host_keys[count.index].private
    host_public_key = local.host_keys[count.index].public
  })

  network {
    port = openstack_networking_port_v2.node[count.index].id
  }
}

# The share's volume; with size_gb = 0 (a cloud without Cinder) there is
# none and the share lives on the first node's own disk.
resource "openstack_blockstorage_volume_v3" "shared" {
  count             = var.shared_storage.size_gb > 0 ? 1 : 0
  name              = "${var.run_id}-shared"
  size              = var.shared_storage.size_gb
  volume_type       = var.volume_type
  availability_zone = var.availability_zone
  metadata = {
    refarch_run_id = var.run_id
  }
}

resource "openstack_compute_volume_attach_v2" "shared" {
  count       = length(openstack_blockstorage_volume_v3.shared)
  instance_id = openstack_compute_instance_v2.node[0].id
  volume_id   = openstack_blockstorage_volume_v3.shared[0].id
}

resource "openstack_networking_floatingip_v2" "bastion" {
  pool        = var.external_network_name
  description = "SSH bastion of ${var.run_id}"
  tags        = local.tags
}

resource "openstack_networking_floatingip_associate_v2" "bastion" {
  floating_ip = openstack_networking_floatingip_v2.bastion.address
  port_id     = openstack_networking_port_v2.node[0].id
  depends_on  = [openstack_networking_router_interface_v2.cluster]
}
