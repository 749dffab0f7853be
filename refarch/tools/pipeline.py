"""The project's GitLab pipeline run on this machine with gitlab-ci-local
(<https://github.com/firecow/gitlab-ci-local>, npm package pinned in
``ci/gitlab-ci-local/package.json`` and its lock file).

gitlab-ci-local evaluates ``rules:`` (``if``, ``changes`` against
``origin/<default branch>``) for the variables it is given, lists the jobs
a pipeline would have (``--list-json``), and runs jobs in its shell
executor. The tests work on a copy of the checkout made into a git
repository of its own (:func:`project_copy`), whose ``origin/main`` is the
checkout as it is on disk, so a scenario's edits are the only changes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import yaml

from .. import version
from ..errors import RefarchError
from ..judge import checks
from ..paths import ROOT

GITLAB_CI_LOCAL = ROOT / "ci" / "gitlab-ci-local" / "node_modules" / ".bin" / "gitlab-ci-local"
#: The remote a copy pretends to come from (gitlab-ci-local derives CI_PROJECT_* from it).
REMOTE = "https://gitlab.example.org/science-cloud/horovod-refarch.git"
#: A job gitlab-ci-local lists with ``when: never`` is not in the pipeline.
NOT_IN_PIPELINE = "never"


def _git(repo: Path, *args: str) -> str:
    return version.git("-c", "user.name=refarch", "-c", "user.email=refarch@localhost", *args, cwd=repo,
                       timeout_s=120)


def project_copy(dest: Path, source: Path = ROOT) -> Path:
    """Copy the files of ``source`` that git would carry (tracked and
    untracked, ignored ones excluded) into a new repository at ``dest`` on
    branch main, committed, with ``origin/main`` at that commit."""
    files = version.git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=source,
                        timeout_s=120).split("\0")
    for rel in filter(None, files):
        src = source / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    _git(dest, "init", "-q", "-b", "main")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-qm", "the checkout as it is on disk")
    _git(dest, "remote", "add", "origin", REMOTE)
    _git(dest, "update-ref", "refs/remotes/origin/main", "HEAD")
    _git(dest, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")
    return dest


def reset(repo: Path) -> None:
    """Drop a scenario's edits: the copy is its ``origin/main`` again."""
    _git(repo, "checkout", "-q", "--", ".")
    _git(repo, "clean", "-fdq", "-e", ".gitlab-ci-local", "-e", ".venv", "-e", ".tox", "-e", ".cache")


def clean_env() -> dict[str, str]:
    """This process's environment without the virtualenv and tox variables
    of the tox run it is in (the jobs make their own) and without the CI
    variables of a pipeline it may itself run in (each scenario sets its own)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TOX_", "VIRTUAL_ENV", "PYTHONHOME", "CI_", "GITLAB_")) and k != "CI"}
    venv = os.environ.get("VIRTUAL_ENV")
    if venv:
        env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(venv))
    return env


def _gcl(repo: Path, args: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    if not GITLAB_CI_LOCAL.exists():
        raise RefarchError(f"{GITLAB_CI_LOCAL} is missing: run `npm ci --prefix ci/gitlab-ci-local` (tox -e pipeline does)")
    return subprocess.run([str(GITLAB_CI_LOCAL), *args], cwd=repo, env=clean_env(), capture_output=True, text=True,
                          timeout=timeout_s)


def _variables(variables: dict[str, str]) -> list[str]:
    return [arg for k, v in sorted(variables.items()) for arg in ("--variable", f"{k}={v}")]


def list_jobs(repo: Path, variables: dict[str, str]) -> dict[str, dict]:
    """Job name -> gitlab-ci-local's listing (``when``, ``allow_failure``,
    ``needs``, ``stage``) of the pipeline ``variables`` describe (e.g.
    ``CI_PIPELINE_SOURCE=merge_request_event``).

    Raises:
        RefarchError: gitlab-ci-local rejected the file (its message).
    """
    r = _gcl(repo, ["--list-json", *_variables(variables)], timeout_s=120)
    try:
        return {job["name"]: job for job in json.loads(r.stdout)}
    except ValueError:
        raise RefarchError(f"gitlab-ci-local --list-json failed (exit {r.returncode}): "
                           f"{(r.stderr or r.stdout).strip()[-1500:]}") from None


def pipeline(listing: dict[str, dict]) -> dict[str, str]:
    """Job name -> ``when`` of the jobs in the pipeline (``never`` left out)."""
    return {name: job["when"] for name, job in listing.items() if job["when"] != NOT_IN_PIPELINE}


def problems(scenario: str, variables: dict[str, str], listing: dict[str, dict],
             expected: dict[str, str]) -> list[str]:
    """One line per job whose place in the pipeline differs from
    ``expected`` (job -> ``on_success`` / ``manual``; jobs not named are
    expected absent), naming the job, the scenario and its event."""
    event = ", ".join(f"{k}={v}" for k, v in sorted(variables.items()))
    actual = pipeline(listing)
    out = []
    for job in sorted(set(actual) | set(expected)):
        got, want = actual.get(job, "absent"), expected.get(job, "absent")
        if got != want:
            out.append(f"{scenario} ({event}): job {job} is {got}, expected {want}")
    return out


def shell_copy(repo: Path) -> Path:
    """``.gitlab-ci-shell.yml`` in ``repo``: the pipeline without its default
    image, so that gitlab-ci-local's shell executor runs the jobs on this
    machine (``--shell-executor-no-image``)."""
    data = yaml.safe_load((repo / ".gitlab-ci.yml").read_text(encoding="utf-8"))
    data.get("default", {}).pop("image", None)
    path = repo / ".gitlab-ci-shell.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def run_jobs(repo: Path, jobs: list[str], variables: dict[str, str], timeout_s: float = 1800) \
        -> subprocess.CompletedProcess:
    """Run ``jobs`` one after another in gitlab-ci-local's shell executor in
    ``repo`` (they share its ``.venv``, as jobs on one runner share a cache)."""
    shell = shell_copy(repo)
    return _gcl(repo, ["--file", shell.name, "--shell-executor-no-image", "--concurrency", "1", "--timestamps",
                       "--no-color", *_variables(variables), *jobs], timeout_s=timeout_s)


def job_results(output: str) -> dict[str, str]:
    """Job name -> PASS / FAIL / WARN from gitlab-ci-local's closing lines
    (`` PASS  [   40 s] lint``)."""
    out = {}
    for line in output.splitlines():
        words = line.replace("[", " ").replace("]", " ").split()
        if len(words) >= 3 and words[0] in ("PASS", "FAIL", "WARN"):
            out[words[-1]] = words[0]
    return out


def job_log(output: str, job: str, lines: int = 40) -> str:
    """The last ``lines`` lines gitlab-ci-local printed for ``job``
    (``[hh:mm:ss  12 s] <job> > ...``), for a failure message."""
    mine = [line for line in output.splitlines() if f"] {job} " in line or line.lstrip().startswith(">")]
    return "\n".join(mine[-lines:])


def failed_jobs(output: str, jobs: list[str]) -> list[str]:
    """One message per job of ``jobs`` that did not pass in gitlab-ci-local's
    ``output``: its verdict and its last lines; a job that never ran quotes
    gitlab-ci-local's own cause line instead (e.g. ``bash: line 1: rsync:
    command not found`` when the shell executor cannot copy the project),
    found by :func:`refarch.judge.checks.cause_line`."""
    results = job_results(output)
    out = []
    for job in jobs:
        if results.get(job) == "PASS":
            continue
        if job in results:
            out.append(f"job {job}: {results[job]}\n{job_log(output, job)}")
        else:
            cause = checks.cause_line(output) or "gitlab-ci-local printed nothing"
            out.append(f"job {job}: did not run; gitlab-ci-local: {cause}")
    return out
