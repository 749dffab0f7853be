variable "run_id" {
  description = "Run id (<prefix>-<pipeline or user>-<6 random chars>), part of every resource name and tag."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{2,46}[a-z0-9]$", var.run_id))
    error_message = "run_id must be 4-48 characters of lowercase letters, digits and '-'."
  }
}

variable "node_count" {
  description = "Number of GPU worker nodes (1-8)."
  type        = number
  default     = 2
  validation {
    condition     = var.node_count >= 1 && var.node_count <= 8 && floor(var.node_count) == var.node_count
    error_message = "node_count must be a whole number from 1 to 8."
  }
}

variable "image_name" {
  description = "Glance image of every node (Debian 12 to match descriptors/versions.yml)."
  type        = string
  validation {
    condition     = length(trimspace(var.image_name)) > 0
    error_message = "image_name must name a Glance image."
  }
}

variable "flavor_name" {
  description = "Nova flavor of a worker node, e.g. a 16 vCPU / 64 GB / 1x V100 flavor."
  type        = string
  validation {
    condition     = length(trimspace(var.flavor_name)) > 0
    error_message = "flavor_name must name a Nova flavor."
  }
}

variable "external_network_name" {
  description = "External (provider) network the router uplinks to and floating IPs come from."
  type        = string
  validation {
    condition     = length(trimspace(var.external_network_name)) > 0
    error_message = "external_network_name must name the cloud's external network."
  }
}

variable "admin_cidr" {
  description = "Only source range allowed to reach SSH (22/tcp) from outside the cluster."
  type        = string
  validation {
    condition     = can(cidrhost(var.admin_cidr, 0)) && !contains(["0.0.0.0/0", "::/0"], var.admin_cidr)
    error_message = "admin_cidr must be a CIDR narrower than the whole internet (not 0.0.0.0/0 or ::/0)."
  }
}

variable "subnet_cidr" {
  description = "Cluster subnet (MPI, NCCL, Gloo and NFS traffic)."
  type        = string
  default     = "10.42.0.0/24"
  validation {
    condition     = can(cidrhost(var.subnet_cidr, 0)) && can(regex("^[0-9.]+/(1[6-9]|2[0-8])$", var.subnet_cidr))
    error_message = "subnet_cidr must be an IPv4 CIDR with a prefix length from /16 to /28."
  }
}

variable "first_host_number" {
  description = "Host number (cidrhost) of the first node; node i gets first_host_number + i."
  type        = number
  default     = 10
  validation {
    condition     = var.first_host_number >= 2 && var.first_host_number <= 200
    error_message = "first_host_number must be from 2 to 200."
  }
}

variable "dns_nameservers" {
  description = "DNS servers handed out on the cluster subnet (empty: the cloud's default)."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for ip in var.dns_nameservers : can(regex("^[0-9]+\\.[0-9]+\\.[0-9]+\\.[0-9]+$", ip))])
    error_message = "dns_nameservers must be IPv4 addresses."
  }
}

variable "ssh_user" {
  description = "Admin user of the image (passwordless sudo), e.g. debian."
  type        = string
  default     = "debian"
  validation {
    condition     = can(regex("^[a-z_][a-z0-9_-]{0,31}$", var.ssh_user))
    error_message = "ssh_user must be a valid Linux user name."
  }
}

variable "ssh_public_key_file" {
  description = "Public key authorized for ssh_user (uploaded as the run's keypair)."
  type        = string
  validation {
    condition     = fileexists(var.ssh_public_key_file)
    error_message = "ssh_public_key_file must name an existing file."
  }
}

variable "ssh_private_key_file" {
  description = "Private key matching ssh_public_key_file (passed through to the cluster contract)."
  type        = string
}

variable "ssh_known_hosts_file" {
  description = "Where the controller keeps known_hosts (passed through to the cluster contract); write the known_hosts output there after apply."
  type        = string
}

variable "ssh_host_keys_dir" {
  description = "Folder with every node's SSH host key pair, <hostname> and <hostname>.pub (node1, node2, ...), made beforehand with: ssh-keygen -q -t ed25519 -N '' -f DIR/node1."
  type        = string
  validation {
    condition     = fileexists("${var.ssh_host_keys_dir}/node1") && fileexists("${var.ssh_host_keys_dir}/node1.pub")
    error_message = "ssh_host_keys_dir must hold node1 and node1.pub (and one pair per further node): ssh-keygen -q -t ed25519 -N '' -f DIR/node1."
  }
}

variable "shared_storage" {
  description = "NFS share exported to the cluster subnet: a volume of size_gb attached to the first node, or with size_gb = 0 (a cloud without Cinder) a folder on the first node's disk."
  type = object({
    export      = string
    mount_point = string
    size_gb     = number
  })
  default = {
    export      = "/srv/shared"
    mount_point = "/shared"
    size_gb     = 1000
  }
  validation {
    condition = (startswith(var.shared_storage.export, "/") && startswith(var.shared_storage.mount_point, "/")
    && var.shared_storage.size_gb >= 0 && var.shared_storage.size_gb <= 16384)
    error_message = "shared_storage paths must be absolute and size_gb from 0 (no volume) to 16384."
  }
}

variable "volume_type" {
  description = "Cinder volume type of the share (null: the cloud's default), e.g. an SSD type."
  type        = string
  default     = null
}

variable "availability_zone" {
  description = "Availability zone of nodes and volume (null: the cloud's default)."
  type        = string
  default     = null
}

variable "gpus_per_node" {
  description = "GPUs of the flavor (0: a CPU flavor); the gpu role installs the NVIDIA stack where it is above 0. Read only by the ansible_inventory output."
  type        = number
  default     = 0
  validation {
    condition     = var.gpus_per_node >= 0 && var.gpus_per_node <= 16
    error_message = "gpus_per_node must be 0-16."
  }
}

variable "extra_ca_certificates" {
  description = "CA certificate files on this host that the nodes must trust besides Debian's (a TLS-intercepting proxy on the way to package registries); the ca_certificates role installs them. Read only by the ansible_inventory output."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for f in var.extra_ca_certificates : can(regex("\\.(crt|pem)$", f))])
    error_message = "extra_ca_certificates must be PEM files named *.crt or *.pem (update-ca-certificates reads only *.crt)."
  }
}
