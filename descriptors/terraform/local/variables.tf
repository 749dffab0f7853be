variable "run_id" {
  description = "Run id (<prefix>-<pipeline or user>-<6 random chars>), part of every resource name and label."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{2,46}[a-z0-9]$", var.run_id))
    error_message = "run_id must be 4-48 characters of lowercase letters, digits and '-'."
  }
}

variable "node_count" {
  description = "Number of worker nodes (1-8)."
  type        = number
  default     = 2
  validation {
    condition     = var.node_count >= 1 && var.node_count <= 8 && floor(var.node_count) == var.node_count
    error_message = "node_count must be a whole number from 1 to 8."
  }
}

variable "subnet_cidr" {
  description = "IPv4 subnet of the run's own podman network, e.g. 10.213.7.0/24 (chosen free from a pool by the suite)."
  type        = string
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

variable "image" {
  description = "Node image (podman tag) built by the suite from descriptors/versions.yml."
  type        = string
  validation {
    condition     = length(var.image) > 0
    error_message = "image must name a podman image."
  }
}

variable "flavor" {
  description = "Size of each node: memory in MiB (the local cloud's flavor)."
  type = object({
    memory_mb = number
  })
  default = { memory_mb = 6144 }
  validation {
    condition     = var.flavor.memory_mb >= 512
    error_message = "flavor.memory_mb must be at least 512."
  }
}

variable "ssh_public_key_file" {
  description = "Public key authorized for the admin user on every node."
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
  description = "File that receives every node's SSH host key, read out of band at creation."
  type        = string
}

variable "shared_storage" {
  description = "Shared storage served by the first node: export path on the server, mount point on every node."
  type = object({
    export      = string
    mount_point = string
  })
  default = {
    export      = "/srv/shared"
    mount_point = "/shared"
  }
  validation {
    condition     = startswith(var.shared_storage.export, "/") && startswith(var.shared_storage.mount_point, "/")
    error_message = "shared_storage.export and shared_storage.mount_point must be absolute paths."
  }
}

variable "labels" {
  description = "Extra podman labels on every container and network of the run: its owner (host, process id and start time, run directory), so that a sweep from any checkout can tell a live or kept run from an orphaned one."
  type        = map(string)
  default     = {}
  validation {
    condition     = alltrue([for k, v in var.labels : can(regex("^[a-z0-9._-]+$", k)) && !strcontains(v, "\n")])
    error_message = "labels keys must be lowercase letters, digits, '.', '_' or '-', and values one line each."
  }
}

variable "admin_cidrs" {
  description = "Ranges besides the controller (this host) that may reach the nodes' SSH (the OpenStack module's admin_cidr). Nothing else outside the cluster reaches the nodes."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for c in var.admin_cidrs : can(cidrhost(c, 0)) && !contains(["0.0.0.0/0", "::/0"], c)])
    error_message = "admin_cidrs must be IPv4 CIDRs, none of them the whole internet."
  }
}

variable "horovod_wheelhouse" {
  description = "Folder on this host with the Horovod wheel built for the node image (the suite's wheelhouse cache); empty: the horovod role builds it on the nodes. Read only by the ansible_inventory output."
  type        = string
  default     = ""
  validation {
    condition     = var.horovod_wheelhouse == "" || startswith(var.horovod_wheelhouse, "/")
    error_message = "horovod_wheelhouse must be an absolute path, or empty."
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
