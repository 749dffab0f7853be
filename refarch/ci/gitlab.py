"""GitLab's ``rules:changes`` made from the environments' inputs, so that a
merge request runs the heavy jobs whose inputs it changes and the two
cannot drift.

Each environment names the GitLab job that runs it (``gitlab`` in
``ci/environments.yml``); a job's ``changes:`` list is the union of its
environments' inputs, a folder as ``folder/**/*``, ``"."`` as ``**/*``,
plus ``ci/environments.yml`` itself and the package (``refarch/**/*``):
which of the suite's modules an environment loads is known only once it
ran (:mod:`.reuse` keys a local run on them), so any change to the suite
runs the job.  ``python -m refarch.ci gitlab --write`` writes them into
``.gitlab-ci.yml``; a unit test fails when the file differs.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from ..errors import RefarchError
from ..paths import ROOT
from .environments import DEFINITIONS, Definitions

PIPELINE = Path(".gitlab-ci.yml")
#: Patterns every generated list carries (module docstring).
ALWAYS = (DEFINITIONS.as_posix(), "refarch/**/*")


def pattern(rel: str, root: Path = ROOT) -> str:
    """The ``changes:`` pattern of input ``rel``: ``**/*`` for ``.``,
    ``rel/**/*`` for a folder, ``rel`` for a file."""
    if rel == ".":
        return "**/*"
    return f"{rel}/**/*" if (root / rel).is_dir() else rel


def changes(defs: Definitions, root: Path = ROOT) -> dict[str, list[str]]:
    """``{job: [pattern, ...]}`` for every job a heavy environment names,
    its environments' inputs in their order, duplicates left out (the
    change tier's jobs run in every pipeline: no changes rule)."""
    out: dict[str, list[str]] = {}
    for env in defs.tier("heavy"):
        if env.gitlab:
            out.setdefault(env.gitlab, [])
            out[env.gitlab] += [pattern(rel, root) for rel in env.inputs]
    return {job: list(dict.fromkeys(["**/*"] if "**/*" in pats else [*pats, *ALWAYS])) for job, pats in out.items()}


def _changes_rule(job: dict) -> list[str] | None:
    for rule in job.get("rules") or []:
        if isinstance(rule, dict) and "changes" in rule:
            return list(rule["changes"])
    return None


def differences(defs: Definitions, root: Path = ROOT) -> list[str]:
    """One line per job of ``.gitlab-ci.yml`` whose ``changes:`` list is not
    the generated one (or that is missing)."""
    data = yaml.safe_load((root / PIPELINE).read_text(encoding="utf-8"))
    out = []
    for job, wanted in changes(defs, root).items():
        if job not in data:
            out.append(f"{PIPELINE}: job {job} (named in {DEFINITIONS}) is missing")
            continue
        found = _changes_rule(data[job])
        if found != wanted:
            out.append(f"{PIPELINE}: job {job}: rules:changes {found} are not those of its environments' inputs "
                       f"{wanted} (python -m refarch.ci gitlab --write)")
    return out


def write(defs: Definitions, root: Path = ROOT) -> list[str]:
    """Write the generated ``changes:`` lists into ``.gitlab-ci.yml`` (the
    first ``- changes:`` rule of each job); returns the jobs changed.

    Raises:
        RefarchError: a job is missing or has no ``- changes:`` rule.
    """
    path = root / PIPELINE
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    changed = []
    for job, wanted in changes(defs, root).items():
        start = next((i for i, line in enumerate(lines) if line.rstrip("\n") == f"{job}:"), None)
        if start is None:
            raise RefarchError(f"{PIPELINE}: no job {job} (named in {DEFINITIONS})")
        end = next((i for i in range(start + 1, len(lines)) if re.match(r"^\S", lines[i])), len(lines))
        rule = next((i for i in range(start, end) if lines[i].strip() == "- changes:"), None)
        if rule is None:
            raise RefarchError(f"{PIPELINE}: job {job} has no '- changes:' rule to write")
        indent = " " * (len(lines[rule]) - len(lines[rule].lstrip()) + 4)
        last = rule + 1
        while last < end and lines[last].startswith(indent + "- "):
            last += 1
        new = [f"{indent}- " + (f'"{p}"' if p.startswith("*") else p) + "\n" for p in wanted]
        if lines[rule + 1:last] != new:
            lines[rule + 1:last] = new
            changed.append(job)
    path.write_text("".join(lines), encoding="utf-8")
    return changed


def matches(pat: str, path: str) -> bool:
    """Whether ``changes:`` pattern ``pat`` matches file ``path`` (relative
    to the checkout), as GitLab's glob does for the patterns
    :func:`pattern` makes: ``**/`` any folders (or none), ``*`` any name
    part within one folder."""
    regex = re.escape(pat).replace(r"\*\*/", "(?:.*/)?").replace(r"\*", "[^/]*")
    return re.fullmatch(regex, path) is not None
