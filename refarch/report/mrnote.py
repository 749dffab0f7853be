"""The merge-request summary: a short Markdown note on the GitLab merge
request whose pipeline ran the suite (verdict, properties with verdicts,
failed checks, a link to the HTML report in the job's artifacts).

Posted with python-gitlab (``project.mergerequests.get(iid).notes.create``)
when GitLab's predefined variables name a merge request
(``CI_SERVER_URL``, ``CI_PROJECT_ID``, ``CI_MERGE_REQUEST_IID``) and a
token is set in ``REFARCH_GITLAB_TOKEN`` (a project access token with the
``api`` scope, as a masked CI variable); otherwise nothing is posted and
the reason is returned.
"""

from __future__ import annotations

import os
from pathlib import Path

import gitlab
import requests

from ..errors import RefarchError
from ..judge import records
from ..judge.results import verdict
from . import html as report

TOKEN_VARIABLE = "REFARCH_GITLAB_TOKEN"


def report_url(run_id: str, env: dict) -> str | None:
    """The report's address among the job's artifacts (GitLab serves
    ``<job url>/artifacts/file/<path>``), or None outside a GitLab job."""
    job = env.get("CI_JOB_URL")
    return f"{job}/artifacts/file/runs/{run_id}/report.html" if job else None


def summary(results: dict, env: dict | None = None) -> str:
    """The Markdown note for one run's results (from ``results.json``)."""
    env = dict(os.environ) if env is None else env
    failed = [c for c in results.get("checks", []) if c["outcome"] in ("failed", "error")]
    template = report._env().get_template("mr-note.md.j2")
    return template.render(r=results, verdict=verdict(results), failed=failed[:20],
                           report_url=report_url(results["run_id"], env)).strip() + "\n"


def post_summary(run_dir: Path, env: dict | None = None) -> str:
    """Post :func:`summary` of ``run_dir`` on the merge request named by
    ``env`` (default: the process environment); return what was done.

    Raises:
        RefarchError: ``run_dir`` has no results.json; GitLab refused the
            note (bad token, no such merge request) or could not be reached.
    """
    env = dict(os.environ) if env is None else env
    results = records.load_results(run_dir)
    missing = [k for k in ("CI_SERVER_URL", "CI_PROJECT_ID", "CI_MERGE_REQUEST_IID") if not env.get(k)]
    if missing:
        return f"mr-note: not a merge-request pipeline ({', '.join(missing)} unset): nothing posted"
    if not env.get(TOKEN_VARIABLE):
        return f"mr-note: {TOKEN_VARIABLE} unset: nothing posted"
    gl = gitlab.Gitlab(env["CI_SERVER_URL"], private_token=env[TOKEN_VARIABLE], timeout=30)
    project = gl.projects.get(env["CI_PROJECT_ID"], lazy=True)
    mr = project.mergerequests.get(env["CI_MERGE_REQUEST_IID"], lazy=True)
    try:
        note = mr.notes.create({"body": summary(results, env)})
    except (gitlab.exceptions.GitlabError, requests.RequestException) as exc:
        raise RefarchError(f"mr-note: GitLab at {env['CI_SERVER_URL']} refused the note on merge request "
                           f"!{env['CI_MERGE_REQUEST_IID']}: {exc}") from None
    return f"mr-note: posted note {note.id} on merge request !{env['CI_MERGE_REQUEST_IID']}"
