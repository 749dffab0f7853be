# The shape of the cluster this module makes, checked by `terraform test`
# against a mock of the OpenStack provider (no cloud, seconds): the suite's
# unit stage runs it with each shipped OpenStack profile's variables
# (tests/unit/test_terraform_openstack.py).  Mock values stand in for what
# the cloud computes (ids, the floating IP's address).

mock_provider "openstack" {
  mock_data "openstack_networking_network_v2" {
    defaults = {
      id = "00000000-0000-4000-8000-0000000000ee"
    }
  }
  # The real provider reads these back from the port's fixed_ip blocks.
  mock_resource "openstack_networking_port_v2" {
    defaults = {
      all_fixed_ips = ["192.0.2.99"]
    }
  }
  mock_resource "openstack_networking_floatingip_v2" {
    defaults = {
      address = "203.0.113.50"
    }
  }
}

run "cluster_shape" {
  command = apply

  assert {
    condition     = length(openstack_compute_instance_v2.node) == var.node_count
    error_message = "expected ${var.node_count} instances, the module makes ${length(openstack_compute_instance_v2.node)}"
  }

  assert {
    condition = alltrue([for i, p in openstack_networking_port_v2.node :
    one(p.fixed_ip).ip_address == cidrhost(var.subnet_cidr, var.first_host_number + i)])
    error_message = "every node's port must have its fixed IP cidrhost(subnet_cidr, first_host_number + i) in the cluster subnet"
  }

  assert {
    condition = alltrue([for i, s in openstack_compute_instance_v2.node :
    one(s.network).port == openstack_networking_port_v2.node[i].id])
    error_message = "every instance must sit on its own planned port"
  }

  assert {
    condition = alltrue([for p in openstack_networking_port_v2.node :
    p.security_group_ids == toset([openstack_networking_secgroup_v2.cluster.id])])
    error_message = "every port must be in the cluster's security group, and in no other"
  }
}

run "security_group" {
  command = apply

  assert {
    condition = (openstack_networking_secgroup_rule_v2.ssh_admin.remote_ip_prefix == var.admin_cidr
      && openstack_networking_secgroup_rule_v2.ssh_admin.protocol == "tcp"
      && openstack_networking_secgroup_rule_v2.ssh_admin.port_range_min == 22
    && openstack_networking_secgroup_rule_v2.ssh_admin.port_range_max == 22)
    error_message = "the only rule with an address range must admit SSH (tcp/22) from admin_cidr"
  }

  assert {
    condition = alltrue([for r in openstack_networking_secgroup_rule_v2.members :
    r.remote_group_id == openstack_networking_secgroup_v2.cluster.id])
    error_message = "the members' rules must admit the cluster's own group by remote group"
  }

  assert {
    condition = alltrue([for r in concat([openstack_networking_secgroup_rule_v2.ssh_admin], values(openstack_networking_secgroup_rule_v2.members)) :
    !contains(["0.0.0.0/0", "::/0"], coalesce(r.remote_ip_prefix, "none"))])
    error_message = "no rule may admit the whole internet (0.0.0.0/0 or ::/0)"
  }
}

run "bastion_and_share" {
  command = apply

  assert {
    condition     = openstack_networking_floatingip_associate_v2.bastion.port_id == openstack_networking_port_v2.node[0].id
    error_message = "the one floating IP must be associated with the first node's port"
  }

  assert {
    condition = (length(openstack_compute_volume_attach_v2.shared) == (var.shared_storage.size_gb > 0 ? 1 : 0)
      && alltrue([for a in openstack_compute_volume_attach_v2.shared :
    a.instance_id == openstack_compute_instance_v2.node[0].id]))
    error_message = "the share's volume (when size_gb > 0) must be attached to the first node"
  }

  assert {
    condition     = strcontains(output.known_hosts, "203.0.113.50 ")
    error_message = "known_hosts must name the bastion's floating IP"
  }
}

run "run_id_everywhere" {
  command = apply

  assert {
    condition = alltrue(concat(
      [for r in concat(
        [openstack_networking_network_v2.cluster, openstack_networking_subnet_v2.cluster,
        openstack_networking_router_v2.cluster, openstack_networking_secgroup_v2.cluster],
        openstack_networking_port_v2.node, openstack_compute_instance_v2.node) :
      startswith(r.name, "${var.run_id}-") && contains(r.tags, "refarch-run:${var.run_id}")],
      [startswith(openstack_compute_keypair_v2.admin.name, "${var.run_id}-"),
      contains(openstack_networking_floatingip_v2.bastion.tags, "refarch-run:${var.run_id}")],
      [for v in openstack_blockstorage_volume_v3.shared : v.metadata.refarch_run_id == var.run_id],
    ))
    error_message = "every name must start with the run id and every tag list must carry refarch-run:<run id>"
  }
}
