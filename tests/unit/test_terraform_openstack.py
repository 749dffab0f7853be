"""The OpenStack root module read by Terraform itself, with the provider the
users get (built from the Go module proxy into the suite's mirror):
``terraform validate``, and ``terraform test`` of its shape
(descriptors/terraform/openstack/tests) with each shipped OpenStack
profile's variables against a mock of the provider.  Mutations of the module
that must fail: a misspelt attribute, a rule admitting the world, a node
count the profile does not expect.  No tool missing turns into a skip."""

import json
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import hcl2
import pytest

from refarch.clouds.drivers import OpenStackCloud
from refarch.paths import PROFILES_DIR, TERRAFORM_DIR, load_versions
from refarch.profile import load_profile
from refarch.tools import providers

MODULE = TERRAFORM_DIR / "openstack"
PROFILES = sorted(p.stem for p in PROFILES_DIR.glob("*.yml") if load_profile(p.stem).cloud == "openstack")


def _terraform(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(workdir), "CHECKPOINT_DISABLE": "1",
           "TF_IN_AUTOMATION": "1", "TF_CLI_CONFIG_FILE": str(workdir.parent / "terraform.tfrc")}
    return subprocess.run(["terraform", *args, "-no-color"], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def initialised(tmp_path_factory) -> Path:
    """A copy of the module, ``terraform init`` from the suite's mirror."""
    work = tmp_path_factory.mktemp("tf") / "openstack"
    shutil.copytree(MODULE, work)
    shutil.copytree(TERRAFORM_DIR / "modules", work.parent / "modules")
    providers.write_cli_config(work.parent / "terraform.tfrc", providers.ensure_providers())
    done = _terraform(work, "init", "-backend=false", "-input=false")
    assert done.returncode == 0, done.stdout + done.stderr
    return work


def _copy(initialised: Path, tmp_path: Path) -> Path:
    work = tmp_path / "openstack"
    shutil.copytree(initialised, work, symlinks=True)
    shutil.copytree(initialised.parent / "modules", tmp_path / "modules")
    shutil.copy(initialised.parent / "terraform.tfrc", tmp_path / "terraform.tfrc")
    return work


def _var_file(profile_name: str, folder: Path) -> Path:
    """terraform.tfvars.json as the OpenStack driver writes it for the profile."""
    ssh = folder / "ssh"
    ssh.mkdir(mode=0o700)
    key = ssh / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    cluster = SimpleNamespace(profile=load_profile(profile_name), run_id="hvd-unit-abc123")
    path = folder / "unit.tfvars.json"
    path.write_text(json.dumps(OpenStackCloud().tf_vars(cluster, key, ssh / "known_hosts")))
    return path


def _mutate(work: Path, old: str, new: str) -> int:
    """Replace ``old`` once in main.tf; returns the 1-based line it was on."""
    text = (work / "main.tf").read_text()
    assert text.count(old) == 1, f"{old!r} not found once in main.tf"
    (work / "main.tf").write_text(text.replace(old, new))
    return text[: text.index(old)].count("\n") + 1


def test_pins_agree_with_versions_yml():
    required = hcl2.loads((MODULE / "versions.tf").read_text())["terraform"][0]["required_providers"][0]
    in_module = {v["source"].strip('"'): v["version"].strip('"') for k, v in required.items() if not k.startswith("__")}
    assert in_module == {p["source"]: p["version"] for p in providers.pins(load_versions())}


def test_validate(initialised):
    done = _terraform(initialised, "validate")
    assert done.returncode == 0, done.stdout + done.stderr


def test_cli_config_installs_only_from_the_mirror(tmp_path):
    text = providers.write_cli_config(tmp_path / "c.tfrc", tmp_path / "mirror").read_text()
    assert f'path    = "{tmp_path / "mirror"}"' in text
    assert '"registry.terraform.io/terraform-provider-openstack/openstack"' in text and "direct" not in text


@pytest.mark.parametrize("profile_name", PROFILES)
def test_shape_of_the_profiles_cluster(initialised, tmp_path, profile_name):
    work = _copy(initialised, tmp_path)
    done = _terraform(work, "test", f"-var-file={_var_file(profile_name, tmp_path)}")
    assert done.returncode == 0 and "0 failed" in done.stdout, done.stdout + done.stderr


def test_a_misspelt_attribute_fails_validate_naming_file_and_line(initialised, tmp_path):
    work = _copy(initialised, tmp_path)
    line = _mutate(work, "  admin_state_up = true\n", "  admin_state_upp = true\n")
    done = _terraform(work, "validate")
    assert done.returncode != 0
    assert f"on main.tf line {line}" in done.stderr and 'An argument named "admin_state_upp"' in done.stderr


@pytest.mark.parametrize("old, new, message", [
    ("  remote_ip_prefix  = var.admin_cidr\n", '  remote_ip_prefix  = "0.0.0.0/0"\n',
     "the only rule with an address range must admit SSH (tcp/22) from admin_cidr"),
    ('resource "openstack_compute_instance_v2" "node" {\n  count             = var.node_count\n',
     'resource "openstack_compute_instance_v2" "node" {\n  count             = 1\n',
     "expected 2 instances, the module makes 1"),
], ids=["rule-admits-the-world", "a-node-short"])
def test_a_mutation_fails_terraform_test(initialised, tmp_path, old, new, message):
    work = _copy(initialised, tmp_path)
    _mutate(work, old, new)
    done = _terraform(work, "test", f"-var-file={_var_file(PROFILES[0], tmp_path)}")
    assert done.returncode != 0
    assert message in re.sub(r"\s+", " ", done.stdout + done.stderr), done.stdout + done.stderr
