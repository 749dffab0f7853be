variable "node_count" {
  description = "Number of worker nodes (1-8)."
  type        = number
  validation {
    condition     = var.node_count >= 1 && var.node_count <= 8 && floor(var.node_count) == var.node_count
    error_message = "node_count must be a whole number from 1 to 8."
  }
}

variable "subnet_cidr" {
  description = "Cluster subnet the node addresses come from."
  type        = string
  validation {
    condition     = can(cidrhost(var.subnet_cidr, 0))
    error_message = "subnet_cidr must be an IPv4 CIDR."
  }
}

variable "first_host_number" {
  description = "Host number (cidrhost) of the first node; node i gets first_host_number + i."
  type        = number
  validation {
    condition     = var.first_host_number >= 2 && var.first_host_number <= 200
    error_message = "first_host_number must be from 2 to 200."
  }
}
