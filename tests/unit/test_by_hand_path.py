"""The by-hand path offline: the how-to block tests/byhand runs has the
steps it relies on, and each module's terraform.tfvars.example sets every
variable a user must set (those without a default) and nothing the module
does not declare.  python-hcl2 parses both."""

from pathlib import Path

import hcl2
import pytest

from refarch.paths import ROOT
from tests.byhand.test_deploy_by_hand import test_the_page_lines_are_the_ones_this_test_knows  # noqa: F401

MODULES = ROOT / "descriptors" / "terraform"


def names(parsed: dict) -> dict:
    """python-hcl2's top-level keys without its quotes and its ``__comments__``."""
    return {k.strip('"'): v for k, v in parsed.items() if not k.startswith("__")}


def declared(module: Path) -> dict[str, bool]:
    """{variable name: whether it has a default} of ``module``."""
    with open(module / "variables.tf", encoding="utf-8") as fh:
        blocks = hcl2.load(fh).get("variable", [])
    return {name: "default" in names(body) for block in blocks for name, body in names(block).items()}


@pytest.mark.parametrize("module", ["local", "openstack"])
def test_the_example_sets_what_a_user_must(module):
    with open(MODULES / module / "terraform.tfvars.example", encoding="utf-8") as fh:
        example = names(hcl2.load(fh))
    variables = declared(MODULES / module)
    unknown = sorted(set(example) - set(variables))
    assert not unknown, f"{module}/terraform.tfvars.example sets undeclared variables {unknown}"
    missing = sorted(n for n, has_default in variables.items() if not has_default and n not in example)
    assert not missing, f"{module}/terraform.tfvars.example leaves out {missing} (no default)"


@pytest.mark.parametrize("module", ["local", "openstack"])
def test_the_module_writes_an_ansible_inventory(module):
    with open(MODULES / module / "outputs.tf", encoding="utf-8") as fh:
        outputs = {name for block in hcl2.load(fh).get("output", []) for name in names(block)}
    assert "ansible_inventory" in outputs
