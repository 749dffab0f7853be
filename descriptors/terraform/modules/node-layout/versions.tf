terraform {
  # Pure arithmetic on the inputs: no provider.
  required_version = ">= 1.4.0, < 2.0.0"
}
