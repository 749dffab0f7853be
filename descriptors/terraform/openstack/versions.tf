terraform {
  required_version = ">= 1.5.0, < 2.0.0"

  # One provider: host keys come from ssh-keygen (ssh_host_keys_dir) and
  # known_hosts is an output, so neither hashicorp/tls nor hashicorp/local
  # is needed.  3.4.0 is also what the suite builds from the Go module proxy
  # (descriptors/versions.yml, terraform_providers).
  required_providers {
    openstack = {
      source  = "terraform-provider-openstack/openstack"
      version = "3.4.0"
    }
  }
}

# Credentials come from clouds.yaml: OS_CLOUD (and OS_CLIENT_CONFIG_FILE for a
# per-run application credential); nothing secret lives in this module.
provider "openstack" {}
