# A root module that carries a secret the way real ones do: a variable
# marked sensitive, used by a provisioner and passed to a sensitive output.
# tests/unit/test_secrets.py drives it through refarch.tools.terraform.

variable "api_password" {
  description = "A credential (the canary)."
  type        = string
  sensitive   = true
}

resource "terraform_data" "uses_secret" {
  input = sha256(var.api_password)

  provisioner "local-exec" {
    command = "test -n \"$API_PASSWORD\" && echo provisioner saw a password of ${length(var.api_password)} characters"
    environment = {
      API_PASSWORD = var.api_password
    }
  }
}

output "api_password" {
  description = "Passed on, as a module passes credentials to the next stage."
  value       = var.api_password
  sensitive   = true
}

output "digest" {
  description = "Not secret."
  value       = terraform_data.uses_secret.output
}
