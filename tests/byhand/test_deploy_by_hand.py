"""The lines of the how-to "Deploy the architecture by hand"
(docs/how-to/deploy-by-hand.md), run as a user would: on the local cloud,
from a folder outside the repository (HOME is a temporary folder, so
``~/hvd`` lies there), every line exactly as the page has it.  The two places a user types (the first line's ``export REPO=...``
and the editor on terraform.tfvars) are the test's: REPO, CLOUD=local and
PROFILE=local, and an EDITOR that sets what the example's comments ask for
(this machine's node image and wheelhouse, a free subnet, a fresh key) plus
the owner labels a shared machine's sweeps read.  The lines then apply the
local module, configure the nodes with ansible-playbook from the module's
``ansible_inventory`` output, run the suite's checks against them in
existing-hosts mode, and destroy.  Whatever the lines leave (a failure
before ``terraform destroy``) is destroyed and swept by the run id.

Run with ``tox -e byhand``; a change of the page's lines that breaks the
path fails here."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from refarch import proc
from refarch.clouds import image, wheelhouse
from refarch.clouds import local as localcloud
from refarch.owner import Owner
from refarch.paths import ROOT, cache_dir
from refarch.profile import load_profile
from refarch.run import new_run_id

#: The how-to whose first ``sh`` block a user types.
PAGE = ROOT / "docs" / "how-to" / "deploy-by-hand.md"
#: What the first line of the page's block must set (the user's own values).
USER_EXPORTS = ("REPO", "CLOUD", "PROFILE")


def page_lines(page: Path = PAGE) -> list[str]:
    """The shell lines of the how-to's first ``sh`` block, comments and
    blank lines left out.

    Raises:
        AssertionError: no such page or block.
    """
    assert page.is_file(), f"no how-to {page}"
    m = re.search(r"```sh\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    assert m, f"{page.relative_to(ROOT)} has no ```sh block"
    lines = []
    for raw in m.group(1).splitlines():
        line = raw.split("  #", 1)[0].rstrip()
        if line and not line.lstrip().startswith("#"):
            lines.append(line)
    return lines


def test_the_page_lines_are_the_ones_this_test_knows():
    """Offline: the block starts with the user's exports and has the steps
    the test replaces or relies on (so an edit of the page cannot silently skip
    the deploy, the configure, the checks or the destroy)."""
    lines = page_lines()
    assert len(lines) <= 10, f"the by-hand block has {len(lines)} lines (at most ten)"
    first = lines[0]
    assert first.startswith("export ") and all(f"{v}=" in first for v in USER_EXPORTS), first
    body = "\n".join(lines)
    for step in ("terraform.tfvars.example", "${EDITOR", "terraform apply", "terraform output -raw ansible_inventory",
                 "ansible-playbook -i inventory.yml", "--existing-hosts", "terraform destroy"):
        assert step in body, f"the by-hand block lacks {step!r}"


EDITOR = r'''#!{python}
"""The user's edit of terraform.tfvars (the test's values)."""
import json, re, sys
values = json.loads({values!r})
path = sys.argv[1]
text = open(path, encoding="utf-8").read()
for key, value in values.items():
    line = f"{{key}} = {{value}}"
    text, n = re.subn(rf"^{{key}}\s*=.*$", lambda _m: line, text, flags=re.M)
    if not n:
        text += line + "\n"
open(path, "w", encoding="utf-8").write(text)
'''


def hcl(value) -> str:
    """A Terraform literal for a string, list or map of strings (JSON is HCL)."""
    return json.dumps(value)


@pytest.fixture
def user(tmp_path):
    """The user's machine: HOME in a temporary folder, a key, and the values
    the example's comments ask for; yields (env, run id); afterwards
    whatever the run left is destroyed, swept by its run id, and its subnet
    reservation dropped."""
    profile = load_profile("local")
    run_id = new_run_id("hvd-byhand")
    home = tmp_path / "home"
    home.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    key = home / ".ssh" / "id_ed25519"
    key.parent.mkdir(mode=0o700)
    proc.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", run_id, "-f", str(key)], timeout_s=30)
    owner = Owner.current(tmp_path)
    tag = image.ensure_image(logs / "image.log", timeout_s=profile.timeouts_s.image)
    wheels = wheelhouse.ensure_wheelhouse(tag, logs / "wheel.log", timeout_s=profile.timeouts_s.wheel)
    net = profile.network
    subnet = localcloud.reserve_subnet(net.subnet_pool, net.subnet_prefix, run_id, owner)
    values = {"run_id": hcl(run_id), "subnet_cidr": hcl(subnet), "image": hcl(tag),
              "horovod_wheelhouse": hcl(str(wheels)), "ssh_public_key_file": hcl(f"{key}.pub"),
              "ssh_private_key_file": hcl(str(key)), "ssh_known_hosts_file": hcl(str(home / "hvd" / "known_hosts")),
              "extra_ca_certificates": hcl(profile.ca_files()),
              "labels": "{" + ", ".join(f"{hcl(k)} = {hcl(v)}" for k, v in owner.labels().items()) + "}"}
    editor = tmp_path / "editor"
    editor.write_text(EDITOR.format(python=sys.executable, values=json.dumps(values)), encoding="utf-8")
    editor.chmod(0o755)
    env = {**os.environ, "HOME": str(home), "EDITOR": str(editor), "REFARCH_CACHE_DIR": str(cache_dir()),
           "REPO": str(ROOT), "CLOUD": "local", "PROFILE": "local"}
    try:
        yield env, run_id
    finally:
        module = home / "hvd" / "local"
        if (module / "terraform.tfstate").is_file() and json.loads(
                (module / "terraform.tfstate").read_text(encoding="utf-8")).get("resources"):
            subprocess.run(["terraform", "destroy", "-auto-approve", "-no-color"], cwd=module, env=env,
                           capture_output=True, text=True, timeout=600)
        localcloud.sweep(run_id)
        localcloud.release_subnet(run_id)


def test_the_by_hand_lines_deploy_configure_check_and_destroy(user, tmp_path):
    env, run_id = user
    lines = page_lines()
    # The user's own first line (REPO=$PWD ...) is the test's env.
    script = "set -euo pipefail\nset -x\n" + "\n".join(lines[1:]) + "\n"
    (tmp_path / "by-hand.sh").write_text(script, encoding="utf-8")
    r = subprocess.run(["bash", str(tmp_path / "by-hand.sh")], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=1800)
    log = tmp_path / "by-hand.log"
    log.write_text(f"--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}\n", encoding="utf-8")
    failed = [line for line in r.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    last = [line for line in r.stderr.splitlines() if line.startswith("+ ")][-1:] or ["(none)"]
    assert r.returncode == 0, (f"the by-hand lines failed (exit {r.returncode}) at {last[0][2:]!r}: "
                               + ("; ".join(failed) or (r.stderr.strip().splitlines() or [""])[-1])
                               + f" (whole output: {log})")
    assert re.search(r"\d+ passed", r.stdout) and not failed, f"the suite's checks did not pass: {r.stdout[-800:]}"
    state = json.loads((Path(env["HOME"]) / "hvd" / "local" / "terraform.tfstate").read_text(encoding="utf-8"))
    assert not state.get("resources"), f"terraform destroy left {[x['name'] for x in state['resources']]}"
    leftovers = proc.run(["podman", "ps", "-a", "--filter", f"label=refarch.run_id={run_id}", "--format",
                          "{{.Names}}"], timeout_s=30).stdout.split()
    assert not leftovers, f"the by-hand run left containers {leftovers}"
