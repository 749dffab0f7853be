"""refarch: deploys the Horovod reference architecture and proves it works.

The package holds the machinery of the validation suite: profiles, the local
cloud (podman "machines"), Terraform and Ansible drivers, run identity and
teardown, the smoke-job arithmetic and the results report.
"""

__version__ = "0.1.0"
