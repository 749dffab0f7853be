terraform {
  required_version = ">= 1.5.0, < 2.0.0"

  required_providers {
    openstack = {
      source  = "terraform-provider-openstack/openstack"
      version = "3.0.0"
    }
    tls = {
      source  = "hashicorp/tls"
      version = "4.0.6"
    }
    local = {
      source  = "hashicorp/local"
      version = "2.5.2"
    }
  }
}

# Credentials come from clouds.yaml: OS_CLOUD (and OS_CLIENT_CONFIG_FILE for a
# per-run application credential); nothing secret lives in this module.
provider "openstack" {}
