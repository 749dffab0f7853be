terraform {
  # terraform_data (built in since 1.4) with local-exec needs no provider, so
  # the local cloud works offline.
  required_version = ">= 1.4.0, < 2.0.0"
}
