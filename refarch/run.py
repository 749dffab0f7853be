"""Run identity and the run directory.

Every run has an id ``<prefix>-<pipeline or user>-<6 random chars>`` that is
in every resource name and label, in the JUnit properties and in the
results.  Its directory (``runs/<run id>``) holds the Terraform state and
module copy, SSH keys, inventory, logs and reports; teardown keeps it.
:class:`RunDir` owns that layout (every file name below is one of its
attributes) and lists the runs (:meth:`RunDir.all`):

  run.json        metadata: profile, overrides, owner, phases, teardown
  contract.json   the cluster contract (Terraform's outputs)
  results.json    the run's results (refarch.judge.results.Results)
  junit.xml       pytest's JUnit report
  report.html     the HTML report (refarch.report.html)
  nodes/<node>/   node logs collected before the teardown of a failed run
  logs/ terraform/ ssh/
"""

from __future__ import annotations

import getpass
import json
import os
import re
import secrets
import string
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import RefarchError
from .owner import Owner
from .paths import runs_dir

RUN_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{2,46}[a-z0-9]$")
_ALPHABET = string.ascii_lowercase + string.digits


def _slug(text: str, limit: int = 20) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:limit].strip("-") or "anon"


def new_run_id(prefix: str = "hvd", env: dict | None = None) -> str:
    """A fresh run id: ``<prefix>-<CI pipeline id or user>-<6 random chars>``."""
    env = os.environ if env is None else env
    who = env.get("CI_PIPELINE_ID") or env.get("USER") or env.get("LOGNAME")
    if not who:
        try:
            who = getpass.getuser()
        except (KeyError, OSError):
            who = "anon"
    suffix = "".join(secrets.choice(_ALPHABET) for _ in range(6))
    return f"{_slug(prefix, 8)}-{_slug(who)}-{suffix}"


def validate_run_id(run_id: str) -> str:
    """Return ``run_id`` or raise :class:`RefarchError` when it is malformed."""
    if not RUN_ID_RE.match(run_id or ""):
        raise RefarchError(f"malformed run id {run_id!r}: 4-48 lowercase letters, digits and '-'")
    return run_id


@dataclass
class RunDir:
    """The directory of one run and the files the suite keeps in it (the
    layout: module docstring)."""

    #: File names inside a run directory.
    META = "run.json"
    RESULTS = "results.json"
    JUNIT = "junit.xml"
    REPORT = "report.html"
    NODES = "nodes"

    run_id: str
    path: Path

    @classmethod
    def at(cls, path: Path) -> RunDir:
        """The run directory ``path`` (its name is the run id), unchecked."""
        return cls(path.name, path)

    @classmethod
    def all(cls, root: Path | None = None, having: str = META) -> list[RunDir]:
        """Every run directory under ``root`` (default ``runs/``) that has
        the file ``having`` (default run.json; :data:`RESULTS`: the runs
        with results), sorted by name."""
        root = runs_dir() if root is None else root
        return [cls.at(p.parent) for p in sorted(root.glob(f"*/{having}"))]

    @classmethod
    def create(cls, run_id: str) -> RunDir:
        """Make ``runs/<run_id>`` (mode 0700: it holds keys, state and
        credentials; error if it exists) and record the owner."""
        path = runs_dir() / validate_run_id(run_id)
        path.mkdir(mode=0o700, exist_ok=False)
        path.chmod(0o700)
        rd = cls(run_id, path)
        rd.logs.mkdir()
        rd.write_owner()
        return rd

    @classmethod
    def open(cls, run_id: str) -> RunDir:
        """The existing directory of a kept run.

        Raises:
            RefarchError: no such run directory.
        """
        path = runs_dir() / validate_run_id(run_id)
        if not path.is_dir():
            raise RefarchError(f"no run directory for run id {run_id} under {runs_dir()}")
        return cls(run_id, path)

    # Files -----------------------------------------------------------------
    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def terraform_dir(self) -> Path:
        return self.path / "terraform"

    @property
    def ssh_dir(self) -> Path:
        return self.path / "ssh"

    @property
    def contract_file(self) -> Path:
        return self.path / "contract.json"

    @property
    def meta_file(self) -> Path:
        return self.path / self.META

    @property
    def results_file(self) -> Path:
        return self.path / self.RESULTS

    @property
    def junit_file(self) -> Path:
        return self.path / self.JUNIT

    @property
    def report_file(self) -> Path:
        return self.path / self.REPORT

    def node_logs_dir(self, node: str | None = None) -> Path:
        """``nodes/`` or, with ``node``, ``nodes/<node>/``."""
        return self.path / self.NODES / node if node else self.path / self.NODES

    def read_results(self) -> dict | None:
        """results.json as a dict; None when there is none or it is not JSON."""
        try:
            return json.loads(self.results_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def read_meta(self) -> dict:
        """The run's metadata (profile, overrides, owner pid, kept flag)."""
        if self.meta_file.is_file():
            return json.loads(self.meta_file.read_text(encoding="utf-8"))
        return {}

    def update_meta(self, **values) -> dict:
        """Merge ``values`` into ``run.json`` and return the result."""
        meta = self.read_meta()
        meta.update(values)
        return self.write_meta(meta)

    def write_meta(self, meta: dict) -> dict:
        """Replace ``run.json`` with ``meta`` (atomically) and return it."""
        tmp = self.meta_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=True), encoding="utf-8")
        tmp.replace(self.meta_file)
        return meta

    def write_owner(self) -> None:
        """Record this process as the run's owner (the podman labels carry
        the same, see :mod:`refarch.owner`)."""
        self.update_meta(run_id=self.run_id, owner=Owner.current(self.path).labels(), started_at=time.time())


def orphaned_runs(pattern: str = "*") -> list[tuple[Path, dict]]:
    """(run directory, run.json) of every run under runs/ matching
    ``pattern`` that is neither destroyed nor kept and whose owner process
    is gone (a killed or cancelled run), oldest name first."""
    out = []
    for path in sorted(runs_dir().glob(pattern)):
        try:
            meta = json.loads(RunDir.at(path).meta_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        owner = Owner.from_labels(meta.get("owner") or {})
        if meta.get("destroyed") or meta.get("kept") or (owner is not None and owner.alive()):
            continue
        out.append((path, meta))
    return out
