"""The GitLab pipeline proven by running it: gitlab-ci-local lists the jobs
of each kind of pipeline (merge request, default branch, version tag,
schedule) in a copy of the checkout, and runs the lint, policy and unit
jobs in its shell executor (``tox -e pipeline``, run by ci/test.sh).  The
jobs that need no local cloud run in the toolset image (refarch/tools/toolset.py)
and bootstrap nothing; in the shell executor the bin folders of tox's unit,
lint and policy environments stand in for the image's tools."""

import os
import subprocess

import pytest
import yaml

from refarch.ci import environments, gitlab
from refarch.paths import ROOT
from refarch.pytest.tools import needs_tool
from refarch.tools import pipeline

pytestmark = [needs_tool("git", "git"),
              needs_tool("gitlab-ci-local", "gitlab-ci-local (tox -e pipeline installs it with npm)",
                         present=pipeline.GITLAB_CI_LOCAL.exists())]

MR = {"CI_PIPELINE_SOURCE": "merge_request_event", "CI_MERGE_REQUEST_IID": "7"}
CLOUD = {"REFARCH_CLOUDS_YAML": "/builds/clouds.yaml"}
TAG = {"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_TAG": "v0.2.0"}
SCHEDULE = {"CI_PIPELINE_SOURCE": "schedule"}
#: The change tier's jobs: every pipeline runs them (ci/environments.yml).
ALWAYS = {"lint": "on_success", "policy": "on_success", "unit": "on_success", "docs": "on_success",
          "fresh-local": "on_success", "integration-local": "on_success"}
#: Jobs that run in the toolset image ($REFARCH_TOOLSET_IMAGE) and bootstrap nothing.
TOOLSET_JOBS = ("lint", "policy", "unit", "gate", "integration-openstack")
#: tox environments whose bin folders stand in for the image's tools (the first one's python and pytest).
TOOL_ENVS = ("unit", "lint", "policy")
ROLE_JOBS = {f"role-{r}": "on_success" for r in ("common", "ca-certificates", "ssh-hardening", "time-sync", "gpu",
                                                 "cluster-ssh", "shared-storage", "openmpi", "horovod", "nfs")}
#: Heavy-tier jobs that run by hand when their inputs did not change (the role jobs are left out).
MANUAL_OTHERWISE = ("availability-local", "configurability-local", "lifecycle-local", "scale-local", "toolset-image",
                    "openstack-aio", "openstack-aio-guests")


def heavy_jobs(variables: dict, files: list[str]) -> dict[str, str]:
    """The heavy tier's jobs as the environments' inputs say (refarch.ci.gitlab):
    every one on schedules and version tags; on other pipelines those whose
    rules:changes patterns match a changed file, the others by hand (or
    absent, for the role jobs)."""
    out = {}
    everything = variables.get("CI_PIPELINE_SOURCE") == "schedule" or "CI_COMMIT_TAG" in variables
    for job, patterns in gitlab.changes(environments.definitions()).items():
        if everything or any(gitlab.matches(p, f) for p in patterns for f in files):
            out[job] = "on_success"
        elif job in MANUAL_OTHERWISE:
            out[job] = "manual"
    return out


#: scenario -> (variables, files the change touches, job -> when for the jobs outside the heavy tier (which
#: heavy_jobs adds); a job not named is not in the pipeline).
SCENARIOS = {
    "merge request changing a role": (MR, ["descriptors/ansible/site.yml"], ALWAYS),
    "merge request changing one role": (MR, ["descriptors/ansible/roles/openmpi/tasks/main.yml"], ALWAYS),
    "merge request changing the pins": (MR, ["descriptors/versions.yml"], ALWAYS),
    "merge request changing a check": (MR, ["tests/integration/test_nodes.py"], ALWAYS),
    "merge request changing the cloud-init template": (MR, [
        "descriptors/terraform/openstack/templates/cloud-init.yaml.tftpl"], ALWAYS),
    "merge request changing the Terraform module, with a cloud": (
        {**MR, **CLOUD}, ["descriptors/terraform/local/main.tf"], {**ALWAYS, "integration-openstack": "manual"}),
    "merge request changing the pipeline": (MR, [".gitlab-ci.yml"], {**ALWAYS, "pipeline": "on_success"}),
    "merge request changing a lock file": (MR, ["ci/toolset/requirements.txt"], {**ALWAYS, "pipeline": "on_success"}),
    "merge request changing only the README": (MR, ["README.md"], ALWAYS),
    "push to the default branch": ({"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_BRANCH": "main",
                                    "CI_DEFAULT_BRANCH": "main"}, ["refarch/judge/gate.py"], ALWAYS),
    "version tag, with a cloud": ({**TAG, **CLOUD}, [], {
        **ALWAYS, "pipeline": "on_success", "integration-openstack": "on_success", "compare-local": "on_success",
        "gate": "on_success", "release": "on_success"}),
    "schedule, with a cloud": ({**SCHEDULE, **CLOUD}, [], {
        **ALWAYS, "role-gpu": "on_success", "pipeline": "on_success", "compare-local": "on_success",
        "janitor": "on_success"}),
}


def expected_jobs(scenario: str) -> dict[str, str]:
    variables, files, others = SCENARIOS[scenario]
    return {**others, **heavy_jobs(variables, files)}


def test_the_heavy_jobs_follow_their_inputs():
    """The review's finding: a change to the pins, a check or an earlier role
    runs the role scenarios whose inputs it is (here, as the rules say)."""
    assert set(heavy_jobs(MR, ["descriptors/versions.yml"])) >= set(ROLE_JOBS) - {"role-gpu"}
    assert "role-common" in heavy_jobs(MR, ["tests/integration/test_nodes.py"])
    openmpi = heavy_jobs(MR, ["descriptors/ansible/roles/openmpi/tasks/main.yml"])
    assert {"role-openmpi", "role-horovod", "role-nfs"} <= set(openmpi) and "role-common" not in openmpi
    assert "role-common" not in heavy_jobs(MR, ["README.md"])


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return pipeline.project_copy(tmp_path_factory.mktemp("pipeline") / "project")


def change(repo, files):
    pipeline.reset(repo)
    for rel in files:
        with open(repo / rel, "a", encoding="utf-8") as fh:
            fh.write("\n# changed by the pipeline test\n")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_kind_of_pipeline_has_the_expected_jobs(repo, scenario):
    variables, files, _others = SCENARIOS[scenario]
    change(repo, files)
    assert pipeline.problems(scenario, variables, pipeline.list_jobs(repo, variables), expected_jobs(scenario)) == []


def test_a_broken_rule_is_named_with_its_job_and_event(repo):
    """Acceptance: a `rules:` edit that drops the integration job from merge
    requests fails, naming the job and the event."""
    change(repo, ["descriptors/ansible/site.yml"])
    data = yaml.safe_load((repo / ".gitlab-ci.yml").read_text())
    data["integration-local"]["rules"] = [{"if": '$CI_PIPELINE_SOURCE == "schedule"'}]
    (repo / ".gitlab-ci.yml").write_text(yaml.safe_dump(data, sort_keys=False))
    variables = SCENARIOS["merge request changing a role"][0]
    found = pipeline.problems("merge request changing a role", variables, pipeline.list_jobs(repo, variables),
                              {**expected_jobs("merge request changing a role"), "pipeline": "on_success"})
    assert found == ["merge request changing a role (CI_MERGE_REQUEST_IID=7, CI_PIPELINE_SOURCE=merge_request_event):"
                     " job integration-local is absent, expected on_success"]


def test_the_pipeline_has_the_promised_shape(repo):
    pipeline.reset(repo)
    data = yaml.safe_load((repo / ".gitlab-ci.yml").read_text())
    assert data["stages"] == ["lint", "test", "roles", "integration", "gate", "release"]
    assert data["default"]["interruptible"] is True
    listing = pipeline.list_jobs(repo, {"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_TAG": "v0.2.0", **CLOUD})
    assert listing["release"]["needs"][0]["job"] == "gate" and listing["release"]["stage"] == "release"
    assert data["integration-openstack"]["resource_group"]
    deploying = [name for name, job in data.items() if isinstance(job, dict) and
                 {".deploys", ".local-cloud"} & set(extends(job))]
    assert set(deploying) >= {"integration-local", "integration-openstack", "availability-local",
                              "configurability-local", "lifecycle-local"}
    assert "molecule destroy -s $ROLE" in "\n".join(data[".role"]["after_script"])
    assert {name for name, job in listing.items() if job["stage"] == "roles"} == set(ROLE_JOBS)
    deploys = data[".deploys"]
    assert deploys["artifacts"]["when"] == "always" and "runs/" in deploys["artifacts"]["paths"]
    assert deploys["artifacts"]["reports"]["junit"]
    for name in deploying:
        after = "\n".join(data[name].get("after_script", deploys["after_script"]))
        assert "refarch sweep --unfinished" in after, f"{name}: no teardown in after_script"


def extends(job: dict) -> list[str]:
    value = job.get("extends", [])
    return [value] if isinstance(value, str) else list(value)


def resolved(data: dict, name: str) -> dict:
    """Job ``name`` with its ``extends`` merged in as GitLab does: in order,
    later ones and the job itself win; mappings merge key by key, anything
    else (scripts, lists) is replaced."""
    def merge(base: dict, over: dict) -> dict:
        out = dict(base)
        for key, value in over.items():
            out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) \
                else value
        return out

    job: dict = {}
    for parent in extends(data[name]):
        job = merge(job, resolved(data, parent))
    return merge(job, {k: v for k, v in data[name].items() if k != "extends"})


def commands(job: dict) -> str:
    return "\n".join([*job.get("before_script", []), *job.get("script", []), *job.get("after_script", [])])


def test_the_jobs_without_a_local_cloud_run_in_the_toolset_image_and_bootstrap_nothing(repo):
    pipeline.reset(repo)
    data = yaml.safe_load((repo / ".gitlab-ci.yml").read_text())
    version = (repo / "descriptors" / "VERSION").read_text().strip()
    assert data["variables"]["REFARCH_TOOLSET_IMAGE"] == f"$CI_REGISTRY_IMAGE/toolset:{version}", \
        "the toolset image's default tag is not the architecture version"
    for name in TOOLSET_JOBS:
        job = resolved(data, name)
        assert job.get("image") == "$REFARCH_TOOLSET_IMAGE", f"{name}: not in the toolset image"
        run = commands(job)
        assert "bootstrap" not in run and ".venv/" not in run and "ci/tox" not in run, f"{name} bootstraps: {run}"
        assert "python -m refarch toolset stage" in "\n".join(job["script"]), f"{name}: not a tox.ini stage"
        assert not job.get("cache"), f"{name}: caches a virtualenv it does not need"
    others = [name for name, job in data.items() if isinstance(job, dict) and "stage" in job
              and name not in TOOLSET_JOBS]
    assert others and all(resolved(data, n).get("image") != "$REFARCH_TOOLSET_IMAGE" for n in others)
    assert all("ci/bootstrap.sh" in commands(resolved(data, n)) for n in others if ".tox" in
               resolved_extends(data, n)), "a job outside the toolset image lost its bootstrap"
    listing = pipeline.list_jobs(repo, {"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_TAG": "v0.2.0", **CLOUD})
    assert set(TOOLSET_JOBS) <= set(pipeline.pipeline(listing))


def resolved_extends(data: dict, name: str) -> set[str]:
    """Every template ``name`` extends, directly or not."""
    out = set()
    for parent in extends(data[name]):
        out |= {parent} | resolved_extends(data, parent)
    return out


@pytest.fixture(scope="module")
def toolset_path():
    """PATH standing in for the toolset image's: the bin folders of tox's
    unit, lint and policy environments (made with ``--notest`` when one is
    missing), before this machine's own."""
    env = pipeline.clean_env()
    if not all((ROOT / ".tox" / e / "bin" / "python").exists() for e in TOOL_ENVS):
        subprocess.run([str(ROOT / ".venv" / "bin" / "tox"), "-q", "-e", ",".join(TOOL_ENVS), "--notest"],
                       cwd=ROOT, env=env, check=True, timeout=1800)
    return os.pathsep.join([*(str(ROOT / ".tox" / e / "bin") for e in TOOL_ENVS), env.get("PATH", "")])


@pytest.mark.skipif(os.environ.get("REFARCH_PIPELINE_RUN_JOBS", "1") == "0", reason="REFARCH_PIPELINE_RUN_JOBS=0")
def test_lint_policy_and_unit_jobs_pass_in_the_shell_executor(repo, toolset_path, monkeypatch):
    pipeline.reset(repo)
    # The shell executor runs jobs without an image: the toolset's gives way
    # to a before_script that puts the stand-in tools first on PATH, as the
    # image's ENV PATH does (the executor's bash reads ~/.bashrc, which may
    # put other Pythons first).
    ci = repo / ".gitlab-ci.yml"
    text = ci.read_text()
    template = ".toolset:\n  image: $REFARCH_TOOLSET_IMAGE\n  before_script: []\n"
    assert template in text
    path_file = repo.parent / "toolset-path"  # yamllint keeps the job's line short
    path_file.write_text(toolset_path, encoding="utf-8")
    ci.write_text(text.replace(template, f".toolset:\n  before_script:\n    - export PATH=\"$(cat {path_file})\"\n"))
    monkeypatch.setenv("PATH", toolset_path)
    pip_cache = os.environ.get("PIP_CACHE_DIR") or os.path.expanduser("~/.cache/pip")
    r = pipeline.run_jobs(repo, ["lint", "policy", "unit"], {"PIP_CACHE_DIR": pip_cache})
    output = r.stdout + r.stderr
    failed = pipeline.failed_jobs(output, ["lint", "policy", "unit"])
    assert not failed, "\n".join(failed)
