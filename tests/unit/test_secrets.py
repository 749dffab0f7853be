"""A canary secret run through the paths a real secret takes appears in no
console output, log file, JUnit file or results JSON; the files that must
hold it (clouds.yaml, Terraform inputs and state) are mode 0600 in a run
directory of mode 0700.

Paths: an OpenStack application credential secret written to a throwaway
project's clouds.yaml (openstacksdk fakes); a Terraform variable marked
sensitive, used by a provisioner and a sensitive output (real Terraform,
offline, through the suite's wrapper); a password-like profile value given
on the command line (rejected before anything is made).
"""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from openstack.identity.v3 import application_credential, domain, project, role, user

from refarch.clouds import openstack_project as osproject
from refarch.judge import results as results_mod
from refarch.paths import ROOT
from refarch.pytest.tools import needs_tool
from refarch.run import RunDir
from refarch.tools.terraform import Terraform

from .test_openstack import fake_conn, res

CANARY = "canary-Zq8VwX3pLk0sN7"
#: Files a run keeps that must hold the secret, and so be private.
MAY_HOLD = {"clouds.yaml", "terraform.tfvars.json", "terraform.tfstate", "terraform.tfstate.backup"}


def _leaks(root: Path) -> list[str]:
    """Files under ``root`` that contain the canary and are not allowed to."""
    out = []
    for path in root.rglob("*"):
        if path.is_file() and path.name not in MAY_HOLD and CANARY in path.read_text(errors="replace"):
            out.append(str(path.relative_to(root)))
    return out


def _mode(path: Path) -> str:
    return oct(stat.S_IMODE(path.stat().st_mode))


@pytest.fixture
def rundir(tmp_path, monkeypatch):
    monkeypatch.setenv("REFARCH_RUNS_DIR", str(tmp_path / "runs"))
    return RunDir.create("hvd-canary-abc123")


def test_run_directory_is_private(rundir):
    assert _mode(rundir.path) == "0o700"


def test_application_credential_secret_stays_in_clouds_yaml(rundir, capsys, caplog):
    admin = fake_conn()
    for method, value in (("find_domain", res(domain.Domain, name="Default")),
                          ("create_project", res(project.Project, name=rundir.run_id)),
                          ("find_user", res(user.User, name="ci-bot")),
                          ("find_role", res(role.Role, name="member"))):
        getattr(admin.identity, method).side_effect = None
        getattr(admin.identity, method).return_value = value
    user_conn = fake_conn()
    user_conn.identity.create_application_credential.side_effect = None
    user_conn.identity.create_application_credential.return_value = res(
        application_credential.ApplicationCredential, secret=CANARY)
    tp = osproject.ThrowawayProject.create(admin, lambda pid: user_conn, rundir.run_id, "Default", "ci-bot", "member",
                                      rundir.path, "https://keystone.example:5000/v3")
    rundir.update_meta(project={"id": tp.project_id, "credential_id": tp.credential_id,
                                "clouds_yaml": str(tp.clouds_yaml), "cloud": tp.cloud_name})
    assert CANARY in tp.clouds_yaml.read_text() and _mode(tp.clouds_yaml) == "0o600"
    out = capsys.readouterr()
    assert CANARY not in out.out + out.err + caplog.text
    assert _leaks(rundir.path) == []


@needs_tool("terraform", "terraform (ci/bootstrap.sh installs it)")
def test_sensitive_terraform_variable_reaches_no_log(rundir, capsys, caplog):
    tf = Terraform(rundir.terraform_dir, "local", rundir.logs / "terraform.log",
                   source=Path(__file__).parent / "data" / "canary")
    tf.write_vars({"api_password": CANARY})
    tf.apply(120)
    outputs = tf.outputs()
    assert outputs["api_password"] == CANARY  # the next stage gets it ...
    res_ = results_mod.Results(rundir.run_id, "local", "local")
    res_.write(rundir.path / "results.json")
    tf.destroy(120)
    # ... but no log, results file or console output does.
    out = capsys.readouterr()
    assert CANARY not in out.out + out.err + caplog.text
    assert _leaks(rundir.path) == [], "canary found in run files"
    log = (rundir.logs / "terraform.log").read_text()
    assert "provisioner saw a password of 21 characters" in log or "suppressed" in log, log[-2000:]
    for name in ("terraform.tfvars.json", "terraform.tfstate"):
        assert _mode(rundir.terraform_dir / name) == "0o600", name


def test_password_like_profile_value_is_not_echoed(tmp_path):
    junit = tmp_path / "junit.xml"
    env = {**os.environ, "REFARCH_RUNS_DIR": str(tmp_path / "runs")}
    r = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "tests/integration"), "--profile", "local",
                        "--set", f"openstack.password={CANARY}", f"--junitxml={junit}", "-p", "no:cacheprovider"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120, env=env, check=False)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "openstack" in r.stderr
    assert CANARY not in r.stdout + r.stderr
    runs = tmp_path / "runs"
    assert not runs.exists() or _leaks(runs) == []
    if junit.exists():
        assert CANARY not in junit.read_text()


def test_results_json_has_no_secret_fields(rundir):
    data = results_mod.Results(rundir.run_id, "local", "local").as_dict()
    assert not [k for k in json.dumps(data).split('"') if "secret" in k.lower() or "password" in k.lower()]
