"""Records of the suite's CI environments, keyed by every input, so that a
heavy environment whose inputs are unchanged since it passed on this
machine is not run again, and is reported as reused, never silently.

An environment's key has four parts:

- ``inputs``: sha256 per declared input (:attr:`Environment.inputs
  <refarch.ci.environments.Environment.inputs>`: descriptors, profiles,
  tests, ci/ scripts; a folder is every file git lists under it);
- ``modules``: sha256 of every module of the package its processes loaded,
  at all depths (each process started with ``REFARCH_LOADED_MODULES``
  appends the modules it loaded, see ``refarch/__init__.py``; the hashes as
  :func:`refarch.tools.rolecache.module_hashes` makes them);
- ``tools``: the versions of the tools it ran (:func:`tool_versions`);
- ``machine``: ``/etc/machine-id`` and the host name.

``tree_key`` is the sha256 of the first two (what the checkout decides: the
release gate compares it, on any machine); ``key`` adds the tools and the
machine.  A record holds the verdict (``passed``, ``failed`` or
``stopped``: stopped at the budget), the seconds it ran, the commit, when
it finished, its JUnit file and the run of ci/test.sh it belongs to.  A
pass is honoured only on the machine that made it, with the same tools,
while every input and module is unchanged, and for ``max_age_s``
(``ci/environments.yml``).  ``REFARCH_CI_REUSE=0`` honours none.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import ROOT, cache_dir
from ..tools import hostcmds, rolecache
from .environments import Environment

#: Records kept per environment (the newest).
KEEP = 20


#: Never inputs: what a run writes, not what it reads.  A version's folder
#: under validation/ holds the records, environments.json and gate.json
#: written after the runs they record (the release criteria are inputs).
OUTPUTS = re.compile(r"^(validation/[^/]+/|\.git/|\.tox/|\.venv/|\.cache/|runs/)|(^|/)__pycache__/|\.pyc$")


def _listed(root: Path, rel: str) -> list[str]:
    """Files under ``rel`` (or ``rel`` itself) that git lists, tracked or
    untracked but not ignored (outside git, every file), :data:`OUTPUTS`
    left out."""
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z", "--", rel], cwd=root,
                             capture_output=True, text=True, check=True, timeout=60).stdout
        names = [n for n in out.split("\0") if n]
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        base = root / rel
        names = ([rel] if base.is_file() else
                 [p.relative_to(root).as_posix() for p in base.rglob("*") if p.is_file()] if base.is_dir() else [])
    return sorted(n for n in names if not OUTPUTS.search(n) and (root / n).is_file())


#: Environment variables that change what an environment runs (tox.ini reads them).
SETTINGS_ENV = ("REFARCH_PROFILE",)


def input_hashes(env: Environment, root: Path = ROOT) -> dict[str, str]:
    """``{input: sha256 hex}`` over the relative path and bytes of every
    file of each of ``env``'s inputs (an input with no file is
    ``"missing"``), and ``definition``: what it runs (its tox environment
    and arguments, from ``ci/environments.yml``, and :data:`SETTINGS_ENV`)."""
    out = {"definition": _sha(env.tox, env.pytest, env.args, {k: os.environ.get(k) for k in SETTINGS_ENV})}
    for rel in env.inputs:
        names = _listed(root, rel)
        if not names:
            out[rel] = "missing"
            continue
        digest = hashlib.sha256()
        for name in names:
            digest.update(name.encode() + b"\0" + hashlib.sha256((root / name).read_bytes()).digest())
        out[rel] = digest.hexdigest()
    return out


def all_module_hashes(root: Path = ROOT) -> dict[str, str]:
    """:func:`refarch.tools.rolecache.module_hashes` of every module of the
    package: taken when an environment starts, so that a module edited
    while it runs does not enter its record with the new hash."""
    names = [rolecache.module_name(p.relative_to(root).as_posix()) for p in (root / "refarch").rglob("*.py")
             if "__pycache__" not in p.parts]
    return rolecache.module_hashes(names, root)


def tox_packages(tox_env: str, root: Path = ROOT) -> str:
    """sha256 over the names of the distributions installed in tox
    environment ``tox_env`` (``.tox/<env>``: their ``*.dist-info`` folders,
    which carry the versions); ``"absent"`` before tox made it."""
    found = sorted(p.name for p in (root / ".tox" / tox_env).glob("lib/python*/site-packages/*.dist-info"))
    return hashlib.sha256("\n".join(found).encode()).hexdigest() if found else "absent"


def tool_versions(env: Environment, root: Path = ROOT) -> dict[str, str]:
    """The versions of the tools ``env`` runs: Python, Terraform, podman,
    QEMU, Node.js, and the Python packages of its tox environment
    (:func:`tox_packages`); the commands are asked once per process."""
    return {"python": platform.python_version(), "terraform": hostcmds.version_line(("terraform", "version")),
            "podman": hostcmds.version_line(("podman", "--version")), "qemu": hostcmds.version_line(("qemu-system-x86_64", "--version")),
            "node": hostcmds.version_line(("node", "--version")), f"tox:{env.tox}": tox_packages(env.tox, root)}


def _sha(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


@dataclass
class Key:
    """An environment's key (module docstring)."""

    inputs: dict[str, str]
    modules: dict[str, str]
    tools: dict[str, str]
    machine: str

    @property
    def tree_key(self) -> str:
        return _sha(self.inputs, self.modules)

    @property
    def key(self) -> str:
        return _sha(self.inputs, self.modules, self.tools, self.machine)

    def as_dict(self) -> dict:
        return {"key": self.key, "tree_key": self.tree_key, "inputs": self.inputs, "modules": self.modules,
                "tools": self.tools, "machine": self.machine}


def current_key(env: Environment, modules: list[str] | dict, root: Path = ROOT,
                tools: dict[str, str] | None = None) -> Key:
    """``env``'s key now, with the package's ``modules`` (dotted names
    below the package, or a record's ``{path: hash}`` whose modules are
    hashed again)."""
    names = [rolecache.module_name(rel) for rel in modules] if isinstance(modules, dict) else list(modules)
    return Key(input_hashes(env, root), rolecache.module_hashes(names, root),
               tools if tools is not None else tool_versions(env, root), rolecache.machine_id())


def enabled() -> bool:
    """False when ``REFARCH_CI_REUSE=0``."""
    return os.environ.get("REFARCH_CI_REUSE", "1") != "0"


def records_dir() -> Path:
    """Where the records live: ``<cache>/ci/`` (a record counts only on the
    machine that wrote it)."""
    return cache_dir() / "ci"


def _file(name: str, where: Path | None) -> Path:
    return (where or records_dir()) / f"{name.replace(':', '_')}.json"


#: Fields a record must have to be read (an older or broken one is skipped).
FIELDS = ("key", "verdict", "seconds", "finished", "machine")


def history(name: str, where: Path | None = None) -> list[dict]:
    """Environment ``name``'s records on this machine, oldest first (a
    file or record that is not of this shape is left out)."""
    try:
        data = json.loads(_file(name, where).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    records = data.get("records") if isinstance(data, dict) else None
    if not isinstance(records, list):
        return []
    out = []
    for r in records:
        if isinstance(r, dict) and all(k in r for k in FIELDS):
            try:
                float(r["seconds"]), float(r["finished"])
            except (TypeError, ValueError):
                continue
            out.append(r)
    return out


def remember(name: str, key: Key, verdict: str, seconds: float, run: str, commit: str | None,
             junit: Path | None = None, where: Path | None = None, now: float | None = None,
             reusable: bool = True) -> dict:
    """Append a record of environment ``name`` (module docstring) and keep
    the newest :data:`KEEP`; its JUnit file is copied beside the records.
    ``reusable`` false: a pass that is never honoured (its processes listed
    no modules, so its key is incomplete).  Returns the record."""
    folder = where or records_dir()
    folder.mkdir(parents=True, exist_ok=True)
    record = {"environment": name, **key.as_dict(), "verdict": verdict, "seconds": round(seconds, 1), "run": run,
              "commit": commit, "finished": now if now is not None else time.time(), "junit": None, "reusable": reusable}
    if junit is not None and junit.is_file():
        kept = folder / "junit" / f"{name.replace(':', '_')}-{key.key[:12]}.xml"
        kept.parent.mkdir(exist_ok=True)
        shutil.copyfile(junit, kept)
        record["junit"] = str(kept)
    records = (history(name, folder) + [record])[-KEEP:]
    tmp = _file(name, folder).with_suffix(".tmp")
    tmp.write_text(json.dumps({"environment": name, "records": records}, indent=1), encoding="utf-8")
    tmp.replace(_file(name, folder))
    return record


@dataclass
class Standing:
    """Where a heavy environment stands on this machine: ``reusable`` is
    the pass honoured for its current key (None: it must run); ``why`` says
    why not (``never`` passed here, ``changed`` inputs, ``old`` pass,
    ``disabled``, ``failed`` or ``stopped``: the newest run with its key
    failed or was stopped at the budget, ``unreusable``: its pass listed no
    module),
    ``changed`` what differs from the newest pass, ``last`` the newest pass
    on this machine (any key), ``last_seconds`` its seconds (how long it
    takes here), and ``at_least_s`` those of a newer run stopped at the
    budget."""

    name: str
    reusable: dict | None = None
    why: str = "never"
    changed: list[str] = field(default_factory=list)
    last: dict | None = None
    last_seconds: float | None = None
    #: Seconds of a newer run stopped at the budget: it takes at least that.
    at_least_s: float | None = None


def differences(record: dict, key: Key) -> list[str]:
    """What differs between ``record``'s key and ``key``: ``input X``,
    ``module refarch/...``, ``tool NAME (old -> new)``."""
    out = [f"input {rel}" for rel in sorted(set(record.get("inputs", {})) | set(key.inputs))
           if record.get("inputs", {}).get(rel) != key.inputs.get(rel)]
    out += [f"module {rel}" for rel, digest in sorted(record.get("modules", {}).items())
            if key.modules.get(rel) != digest]
    out += [f"tool {name} ({record.get('tools', {}).get(name)} -> {value})" for name, value in sorted(key.tools.items())
            if record.get("tools", {}).get(name) != value]
    return out


def standing(env: Environment, max_age_s: float, root: Path = ROOT, where: Path | None = None,
             now: float | None = None, tools: dict[str, str] | None = None) -> Standing:
    """Where ``env`` stands (:class:`Standing`): the newest record on this
    machine whose key, made again now over the modules it loaded, is the
    same decides: a pass, younger than ``max_age_s`` and not marked
    unreusable, is honoured; a failure or stop with that key is not."""
    now = time.time() if now is None else now
    machine = rolecache.machine_id()
    mine = [r for r in history(env.name, where) if r.get("machine") == machine]
    out = Standing(env.name)
    passes = [r for r in mine if r["verdict"] == "passed"]
    if passes:
        out.last, out.last_seconds = passes[-1], float(passes[-1]["seconds"])
    stopped = [r for r in mine if r["verdict"] == "stopped" and (not passes or r["finished"] > passes[-1]["finished"])]
    if stopped:
        out.at_least_s = max(float(r["seconds"]) for r in stopped)
    if not mine:
        return out
    tools = tools if tools is not None else tool_versions(env, root)
    keys: dict[str, Key] = {}
    for record in reversed(mine):
        modules = record.get("modules") or {}
        cache_key = json.dumps(sorted(modules))
        keys.setdefault(cache_key, current_key(env, modules, root, tools))
        if keys[cache_key].key != record["key"]:
            continue
        if record["verdict"] != "passed" or not record.get("reusable", True):
            out.why = {"failed": "failed", "stopped": "stopped"}.get(record["verdict"], "unreusable")
            return out
        if not 0 <= now - float(record["finished"]) <= max_age_s:
            out.why = "old"
            return out
        if not enabled():
            out.why = "disabled"
            return out
        out.reusable = record
        out.why = ""
        return out
    if out.last is None:
        return out
    out.why = "changed"
    out.changed = differences(out.last, current_key(env, out.last.get("modules") or {}, root, tools))
    return out


def describe_pass(record: dict | None, now: float | None = None) -> str:
    """``passed on tree <commit> at <UTC time> (<age> ago, <seconds> s;
    key <12 hex>)``, or ``never on this machine``."""
    if not record:
        return "never on this machine"
    age_h = ((time.time() if now is None else now) - float(record["finished"])) / 3600
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(float(record["finished"])))
    return (f"passed on tree {str(record.get('commit') or 'outside git')[:19]} at {when} ({age_h:.1f} h ago, "
            f"{record['seconds']:.0f} s in run {record.get('run')}; key {record['key'][:12]})")
